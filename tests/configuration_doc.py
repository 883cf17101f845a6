"""The configuration tables of docs/configuration.md, printed from the settings themselves.

``python -m tests.configuration_doc`` prints them; a test holds the page to this output, so
a variable, default or meaning changes in one place, ``hooks/settings.py``.
"""

from __future__ import annotations

import sys

from hooks.settings import GROUPS, documented


def tables() -> dict[str, str]:
    """One Markdown table per settings group, keyed by the group's class name."""
    rows: dict[str, list[str]] = {group.__name__: [] for group in GROUPS}
    for group, variable, default in documented():
        name = f"`{variable.name}`" + (f" (or `{variable.name}_FILE`)" if variable.secret else "")
        shown = f"`{default}`" if default != "unset" and " " not in default else default
        rows[group.__name__].append(f"| {name} | {shown} | {variable.description} |")
    header = ["| variable | default | meaning |", "|---|---|---|"]
    return {group: "\n".join(header + lines) for group, lines in rows.items()}


def main() -> int:
    for group, table in tables().items():
        sys.stdout.write(f"<!-- {group} -->\n{table}\n\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
