"""Hypothesis strategies for image references: made of parts that are each well formed or
a character away from it, where a parser and the kubelet's are most likely to disagree."""

from __future__ import annotations

from hypothesis import strategies as st

SHA256 = "sha256:" + "0123456789abcdef" * 4
ALPHABET = "aB0.:_-/@[]!"
COMPONENTS = st.one_of(
    st.text("ab0", min_size=1, max_size=4),
    st.sampled_from(["x.y", "a_b", "a__b", "a---b", "A", "-a", "a.", "a___b", "", "a b"]),
    st.text("ab0._-", min_size=1, max_size=6),
)
REGISTRIES = st.one_of(
    st.sampled_from(["ghcr.io", "localhost", "index.docker.io", "10.0.0.1", "[::1]", "Reg-1.Example", "[::1", "a_b.c"]),
    st.text("aB0.-", min_size=1, max_size=8),
)
SUFFIXES = st.one_of(
    st.sampled_from(["", f"@{SHA256}", f":v1@{SHA256}", ":a:b", "@sha256:abc", "@SHA256:" + "0" * 64, "@sha512:" + "0" * 128]),
    st.text("aZ0_.-", min_size=1, max_size=6).map(lambda tag: f":{tag}"),
)


@st.composite
def near_references(draw: st.DrawFn) -> str:
    """References made of parts that are each well formed or a character away from it."""
    registry = draw(st.one_of(st.just(""), REGISTRIES.map(lambda host: host + "/"), REGISTRIES.map(lambda host: host + ":5000/")))
    path = draw(st.lists(COMPONENTS, min_size=1, max_size=3))
    return registry + "/".join(path) + draw(SUFFIXES)
