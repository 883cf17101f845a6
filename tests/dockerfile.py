"""The Dockerfile read as a list of instructions, one per logical line."""

from __future__ import annotations

import re
from pathlib import Path

DOCKERFILE = Path(__file__).resolve().parents[1] / "Dockerfile"

Instruction = tuple[str, str]


def instructions(path: Path = DOCKERFILE) -> list[Instruction]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", path.read_text(encoding="utf-8"))
    found = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            found.append((word.upper(), rest.strip()))
    return found


def stages(path: Path = DOCKERFILE) -> list[list[Instruction]]:
    """The build stages, each starting with its FROM (what precedes the first FROM is left out)."""
    found: list[list[Instruction]] = []
    for word, rest in instructions(path):
        if word == "FROM":
            found.append([])
        if found:
            found[-1].append((word, rest))
    return found


def python_version(path: Path = DOCKERFILE) -> str:
    """The Python of the base image the Dockerfile names by default (``python:X.Y-slim``)."""
    arguments = dict(rest.split("=", 1) for word, rest in instructions(path) if word == "ARG" and "=" in rest)
    image = re.fullmatch(r"python:(\d+\.\d+)-slim", arguments["PYTHON_IMAGE"])
    assert image, f"PYTHON_IMAGE={arguments['PYTHON_IMAGE']} is not python:X.Y-slim"
    return image.group(1)
