"""What the kubelet accepts as an image, transcribed to check ``hooks.image_reference`` by.

The regular expressions are those of github.com/distribution/reference ``regexp.go``,
composed the same way; ``kubelet_accepts`` follows ``ParseNormalizedNamed`` and
``splitDockerDomain`` (``normalize.go``), ``Parse`` (``reference.go``) and go-digest's
``Validate`` for the algorithms it registers. It is written as upstream writes it (one
regular expression over the whole reference), unlike the hook's step-by-step parser,
so that the two agreeing means something. Names here stay short: the length limit is
checked by its own examples.
"""

from __future__ import annotations

import re

_ALPHANUMERIC = r"[a-z0-9]+"
_SEPARATOR = r"(?:[._]|__|[-]+)"
_DOMAIN_NAME_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_OPTIONAL_PORT = r"(?::[0-9]+)?"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*[:][0-9a-fA-F]{32,}"
_IPV6_ADDRESS = r"\[(?:[a-fA-F0-9:]+)\]"
_DOMAIN_NAME = _DOMAIN_NAME_COMPONENT + r"(?:\." + _DOMAIN_NAME_COMPONENT + r")*"
_HOST = r"(?:" + _DOMAIN_NAME + "|" + _IPV6_ADDRESS + ")"
_DOMAIN_AND_PORT = _HOST + _OPTIONAL_PORT
_PATH_COMPONENT = _ALPHANUMERIC + r"(?:" + _SEPARATOR + _ALPHANUMERIC + r")*"
_REMOTE_NAME = _PATH_COMPONENT + r"(?:/" + _PATH_COMPONENT + r")*"
_NAME = r"(?:" + _DOMAIN_AND_PORT + r"/)?" + _REMOTE_NAME

_REFERENCE = re.compile(r"^(" + _NAME + r")(?::(" + _TAG + r"))?(?:@(" + _DIGEST + r"))?$", re.ASCII)
_IDENTIFIER = re.compile(r"^[a-f0-9]{64}$")
_ENCODED = {"sha256": re.compile(r"^[a-f0-9]{64}$"), "sha384": re.compile(r"^[a-f0-9]{96}$"), "sha512": re.compile(r"^[a-f0-9]{128}$")}


def _split_docker_domain(name: str) -> tuple[str, str]:
    maybe_domain, slash, maybe_remote = name.partition("/")
    if not slash:
        return "docker.io", "library/" + name
    if maybe_domain == "localhost" or any(c in maybe_domain for c in ".:") or maybe_domain.lower() != maybe_domain:
        domain, remote = maybe_domain, maybe_remote
    else:
        domain, remote = "docker.io", name
    if domain == "index.docker.io":
        domain = "docker.io"
    if domain == "docker.io" and "/" not in remote:
        remote = "library/" + remote
    return domain, remote


def kubelet_accepts(text: str) -> bool:
    """Whether ``ParseNormalizedNamed(text)`` returns a reference rather than an error."""
    if _IDENTIFIER.match(text):
        return False
    domain, remainder = _split_docker_domain(text)
    remote = remainder.split(":", 1)[0]
    if remote.lower() != remote:
        return False
    match = _REFERENCE.match(f"{domain}/{remainder}")
    if match is None:
        return False
    digest = match.group(3)
    if digest is None:
        return True
    algorithm, _, encoded = digest.partition(":")
    return algorithm in _ENCODED and _ENCODED[algorithm].match(encoded) is not None
