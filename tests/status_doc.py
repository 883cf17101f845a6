"""The table of docs/status.md, printed from the catalogue of reasons itself.

``python -m tests.status_doc`` prints it; a test holds the page to this output, so a reason,
its state, meaning or what to do changes in one place, ``hooks/reasons.py``.
"""

from __future__ import annotations

import sys

from hooks.reasons import Reason

NO_CONDITION = "none: the hook's metrics and logs"


def table() -> str:
    """Every reason, condition by condition, as the catalogue orders them."""
    rows = [
        f"| `{reason}` | {f'`{reason.condition}`' if reason.condition else NO_CONDITION} | `{reason.state}` "
        f"| {reason.meaning} | {reason.action} |"
        for reason in Reason
    ]
    return "\n".join(["| reason | condition | state | meaning | what to do |", "|---|---|---|---|---|", *rows])


def main() -> int:
    sys.stdout.write(table() + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
