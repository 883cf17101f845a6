"""An image reference is accepted exactly when the kubelet would accept it."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from hooks.image_reference import ImageReference, ImageReferenceError, parse_image_reference
from tests.distribution_reference import kubelet_accepts
from tests.image_reference_strategies import ALPHABET, SHA256, near_references



@pytest.mark.parametrize(
    ("text", "parts"),
    [
        ("ghcr.io/moirai-internal/ome-agent:v0.1.5", ("ghcr.io", "moirai-internal/ome-agent", "v0.1.5", "")),
        ("ubuntu", ("", "ubuntu", "", "")),
        ("library/ubuntu:22.04", ("", "library/ubuntu", "22.04", "")),
        ("localhost/agent", ("localhost", "agent", "", "")),
        ("localhost:5000/team/agent:Latest_1", ("localhost:5000", "team/agent", "Latest_1", "")),
        ("[::1]:5000/agent", ("[::1]:5000", "agent", "", "")),
        ("10.0.0.7:5000/agent", ("10.0.0.7:5000", "agent", "", "")),
        ("Registry.Example.com/agent", ("Registry.Example.com", "agent", "", "")),
        ("registry.example.com/a.b/c__d/e---f/g_h", ("registry.example.com", "a.b/c__d/e---f/g_h", "", "")),
        (f"ghcr.io/x/y@{SHA256}", ("ghcr.io", "x/y", "", SHA256)),
        (f"ghcr.io/x/y:v1@{SHA256}", ("ghcr.io", "x/y", "v1", SHA256)),
        ("ghcr.io/x/y@sha512:" + "ab" * 64, ("ghcr.io", "x/y", "", "sha512:" + "ab" * 64)),
        ("a_b.c/agent", ("", "a_b.c/agent", "", "")),
        ("registry.example.com/" + "a" * 234, ("registry.example.com", "a" * 234, "", "")),
        ("agent:" + "t" * 128, ("", "agent", "t" * 128, "")),
    ],
)
def test_reference_the_kubelet_accepts_is_split_into_its_parts(text: str, parts: tuple[str, str, str, str]) -> None:
    assert parse_image_reference(text) == ImageReference(*parts)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("foo!!", "path component 'foo!!' must be lowercase letters and digits"),
        ("ghcr.io/Foo/Bar:v1", "repository path must be lowercase"),
        ("ghcr.io/x/y:tag:tag", "more than one ':tag'"),
        ("https://ghcr.io/x/y", "drop the scheme 'https://'"),
        ("not an image", "path component 'not an image'"),
        ("", "it is empty"),
        ("ghcr.io/x/y:", "tag '' must be"),
        ("ghcr.io/x/y:.v1", "tag '.v1' must be"),
        ("agent:" + "t" * 129, "must be 1 to 128"),
        ("ghcr.io/x/y@", "digest '' must be"),
        ("ghcr.io/x/y@sha256:" + "0" * 63, "digest 'sha256:"),
        ("ghcr.io/x/y@sha256:" + "A" * 64, "lowercase hexadecimal"),
        ("ghcr.io/x/y@md5:" + "0" * 32, "digest 'md5:"),
        ("0123456789abcdef" * 4, "image id"),
        ("ghcr.io//y", "empty component"),
        ("ghcr.io/x/", "empty component"),
        ("ghcr.io/x..y", "path component 'x..y'"),
        ("ghcr.io/x___y", "path component 'x___y'"),
        ("ghcr.io/-x", "path component '-x'"),
        ("ghcr.io:port/x", "registry 'ghcr.io:port'"),
        ("-ghcr.io/x", "registry '-ghcr.io'"),
        ("ghcr.io/ome/agent\n", "path component 'agent\\n'"),
        ("registry.example.com/" + "a" * 235, "longer than 255"),
    ],
)
def test_reference_the_kubelet_refuses_is_refused_naming_the_rule(text: str, reason: str) -> None:
    with pytest.raises(ImageReferenceError, match=None) as refusal:
        parse_image_reference(text)
    assert reason in str(refusal.value)


@settings(max_examples=1000, derandomize=True, deadline=None, database=None)
@given(st.one_of(near_references(), st.text(ALPHABET, max_size=24)))
def test_parser_agrees_with_the_kubelet_on_every_short_reference(text: str) -> None:
    try:
        parse_image_reference(text)
    except ImageReferenceError:
        accepted = False
    else:
        accepted = True
    assert accepted == kubelet_accepts(text), text
