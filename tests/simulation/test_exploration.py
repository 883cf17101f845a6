"""Every lifecycle scenario, both kinds, under Sieve's three perturbations (``tests/exploration.py``).

A tier of its own (``-m exploration``, run by ``.ci/run`` after the suite): it replays
each scenario once per perturbation point kept, a few hundred runs in all.
"""

from __future__ import annotations

import pytest

from tests import exploration, lifecycle

pytestmark = pytest.mark.exploration

REPORT = exploration.Report()
CASES = [(name, kind) for name in lifecycle.SCENARIOS for kind in lifecycle.KINDS]


@pytest.mark.parametrize(("name", "kind"), CASES)
def test_the_scenario_keeps_its_promises_under_every_perturbation(name: str, kind: str) -> None:
    found = exploration.Report()
    exploration.explore(name, kind, found)
    REPORT.explored.update(found.explored)
    REPORT.pruned.update(found.pruned)
    assert found.violations == [], "\n".join(found.violations)
    assert set(found.explored) == set(exploration.CLASSES), dict(found.explored)


def test_every_class_was_explored_at_a_few_hundred_points_in_all() -> None:
    """Runs last in this module: what the scenarios above explored, together."""
    if len(REPORT.explored) < len(exploration.CLASSES):
        pytest.skip("run with the whole exploration tier: only some scenarios ran")
    assert all(REPORT.explored[cls] >= 100 for cls in exploration.CLASSES), REPORT.explored
