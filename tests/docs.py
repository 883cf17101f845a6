"""The project's prose, README.md and docs/*.md, as the tests that hold it to the code read it.

A fact may move between the README and a page of docs/ without a test noticing; only what
the prose says is checked, not where.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
PAGES = (README, *sorted((REPO / "docs").glob("*.md")))


def text() -> str:
    """Every page, README first, one after another."""
    return "\n\n".join(page.read_text(encoding="utf-8") for page in PAGES)


def blocks(language: str) -> list[str]:
    """The fenced code blocks of ``language`` on every page, in reading order."""
    return re.findall(rf"```{language}\n(.*?)```", text(), re.S)


def table_after(heading_line: str) -> list[str]:
    """The first cell of every row of the table whose header row is ``heading_line``."""
    rows = text().split(heading_line, 1)[1].split("\n\n", 1)[0].splitlines()[2:]
    return [row.split("|")[1].strip() for row in rows]


CURL_EXAMPLE = re.compile(
    r"```sh\ncurl -s -X POST localhost:8080/(?P<hook>\w+) -H 'Content-Type: application/json' -d (?P<data>'[^']*'|\S+)"
    r"[^\n]*\n```\n> answers: (?P<expect>[^\n]+)"
)
REPLAY_EXAMPLE = re.compile(
    r"```sh\n\.venv/bin/basemodel-hook replay (?P<file>\S+) --now (?P<now>\S+)\n```\n> answers: (?P<expect>[^\n]+)"
)


def documented_examples() -> list[re.Match[str]]:
    return list(CURL_EXAMPLE.finditer(text()))


def documented_replay_examples() -> list[re.Match[str]]:
    return list(REPLAY_EXAMPLE.finditer(text()))
