"""Container image references, read as the kubelet reads a container's ``image``.

The kubelet parses an image with ``ParseNormalizedNamed`` from github.com/distribution/reference
(``normalize.go``, over the grammar of ``reference.go`` and ``regexp.go``) and fails the pod
with InvalidImageName when it cannot. The hook puts ``OME_AGENT_IMAGE`` into every Job it
builds, so a reference the kubelet would refuse is refused when the server starts instead,
with the rule it breaks.
"""

from __future__ import annotations

import re
from typing import NamedTuple

EXPECTED_FORM = "[registry[:port]/]path[:tag][@sha256:digest]"
# Registry and path together, as distribution's Parse has long counted them (its newest
# releases count the path alone: this is the stricter of the two).
NAME_MAX_LENGTH = 255

_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = re.compile(rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[a-fA-F0-9:]+\])(?::[0-9]+)?")
_PATH_COMPONENT = re.compile(r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*")
_TAG = re.compile(r"[\w][\w.-]{0,127}", re.ASCII)
_DIGEST = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}")
_IDENTIFIER = re.compile(r"[a-f0-9]{64}")
# The algorithms go-digest registers, and the length of each one's lowercase hex.
_DIGEST_HEX_LENGTHS = {"sha256": 64, "sha384": 96, "sha512": 128}


class ImageReferenceError(ValueError):
    """The text is no image reference; the message is the rule it breaks."""


class ImageReference(NamedTuple):
    """A reference split as the kubelet splits it; ``domain`` is empty for Docker Hub's."""

    domain: str
    path: str
    tag: str
    digest: str


def parse_image_reference(text: str) -> ImageReference:
    """``text`` split into its parts, or ImageReferenceError saying which rule it breaks."""
    if not text:
        raise ImageReferenceError("it is empty")
    scheme = re.match(r"[A-Za-z][A-Za-z0-9+.-]*://", text)
    if scheme:
        raise ImageReferenceError(f"drop the scheme {scheme.group()!r}")
    if _IDENTIFIER.fullmatch(text):
        raise ImageReferenceError("64 hexadecimal digits are an image id, not a repository name")
    name, at, digest = text.partition("@")
    if at:
        _check_digest(digest)
    domain, remainder = _split_domain(name)
    path, colon, tag = remainder.partition(":")
    if colon:
        _check_tag(tag)
    if domain and not _DOMAIN.fullmatch(domain):
        if not _PATH_COMPONENT.fullmatch(domain):
            raise ImageReferenceError(f"registry {domain!r} is not a host name or [IPv6] address with an optional :port")
        # No registry, but a first path component with a '.', as ``Parse`` then reads it.
        domain, path = "", f"{domain}/{path}"
    _check_path(path)
    if len(domain) + len(path) + (1 if domain else 0) > NAME_MAX_LENGTH:
        raise ImageReferenceError(f"registry and path are longer than {NAME_MAX_LENGTH} characters")
    return ImageReference(domain, path, tag, digest)


def _split_domain(name: str) -> tuple[str, str]:
    """The registry and the rest, split where ``splitDockerDomain`` splits: the first
    component is a registry when it has a '.' or ':', is ``localhost``, or has an
    uppercase letter (a path cannot); otherwise the reference is Docker Hub's."""
    first, slash, rest = name.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost" or first.lower() != first):
        return first, rest
    return "", name


def _check_path(path: str) -> None:
    for component in path.split("/"):
        if _PATH_COMPONENT.fullmatch(component):
            continue
        if not component:
            raise ImageReferenceError("its path has an empty component")
        if _PATH_COMPONENT.fullmatch(component.lower()):
            raise ImageReferenceError("repository path must be lowercase")
        raise ImageReferenceError(
            f"path component {component!r} must be lowercase letters and digits, "
            "joined by one '.', one or two '_', or dashes"
        )


def _check_tag(tag: str) -> None:
    if ":" in tag:
        raise ImageReferenceError("it has more than one ':tag'")
    if not _TAG.fullmatch(tag):
        raise ImageReferenceError(f"tag {tag!r} must be 1 to 128 letters, digits, '_', '.' or '-', not starting with '.' or '-'")


def _check_digest(digest: str) -> None:
    """As go-digest's ``Parse``: a well-formed digest of a registered algorithm, its hex
    lowercase and exactly as long as that algorithm's."""
    algorithm, _, hex_digits = digest.partition(":")
    length = _DIGEST_HEX_LENGTHS.get(algorithm)
    if not _DIGEST.fullmatch(digest) or length is None or not re.fullmatch(rf"[a-f0-9]{{{length}}}", hex_digits):
        raise ImageReferenceError(
            f"digest {digest!r} must be sha256: and 64 lowercase hexadecimal digits (or sha384: 96, sha512: 128)"
        )
