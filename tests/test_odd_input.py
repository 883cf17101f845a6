"""No input, however odd, gets a 5xx or drops a running Job.

Each saved request is mutated at random places (keys removed, values swapped for values
of other types) with a fixed seed, so every run checks the same few thousand requests.
"""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path
from typing import Any

import pytest

from hooks.pvc.metadata_job import STORAGE_URI_ANNOTATION
from tests import golden

ODD_VALUES: list[Any] = [None, 0, -1, 2**63, 1.5, True, "", "x", "pvc://", "\u0000", [], [None], {}, {"metadata": 1}]
SMALL_CASES = [path for path in golden.cases() if path.stat().st_size < 200_000]
MUTANTS_PER_CASE = 60


def paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a JSON document, parents before children."""
    found = [prefix] if prefix else []
    if isinstance(node, dict):
        for key, value in node.items():
            found += paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += paths(value, (*prefix, index))
    return found


def mutate(document: Any, rng: random.Random) -> Any:
    mutant = copy.deepcopy(document)
    for _ in range(rng.randint(1, 3)):
        places = paths(mutant)
        if not places:
            return rng.choice(ODD_VALUES)
        *parent_path, last = rng.choice(places)
        parent = mutant
        for step in parent_path:
            parent = parent[step]
        if isinstance(parent, dict) and rng.random() < 0.4:
            del parent[last]
        else:
            parent[last] = copy.deepcopy(rng.choice(ODD_VALUES))
    return mutant


def running_jobs_for_current_uri(request: Any) -> set[tuple[str, str]]:
    """Observed Jobs built for the parent's URI and not finished: these must survive."""
    try:
        uri = request["parent"]["spec"]["storage"]["storageUri"]
        jobs = request["children"]["Job.batch/v1"].values()
    except (KeyError, TypeError, AttributeError):
        return set()
    kept = set()
    for job in jobs:
        try:
            finished = any(
                c.get("status") == "True" and c.get("type") in ("Complete", "Failed", "FailureTarget")
                for c in job.get("status", {}).get("conditions", [])
            )
            if job["metadata"]["annotations"][STORAGE_URI_ANNOTATION] == uri and not finished:
                kept.add((job["metadata"]["namespace"], job["metadata"]["name"]))
        except (KeyError, TypeError, AttributeError):
            continue
    return kept


@pytest.mark.parametrize("request_file", SMALL_CASES, ids=lambda path: f"{golden.hook_of(path)}/{path.name[:-13]}")
def test_mutated_requests_get_an_answer_or_a_4xx_never_a_5xx(request_file: Path) -> None:
    original = golden.load(request_file)
    rng = random.Random(request_file.name)
    client = golden.client()
    hook = golden.hook_of(request_file)
    for _ in range(MUTANTS_PER_CASE):
        mutant = mutate(original, rng)
        reply = client.post(f"/{hook}", data=json.dumps(mutant), content_type="application/json")
        assert reply.status_code in (200, 400), (reply.status_code, reply.get_data()[:500], mutant)
        body = reply.get_json()
        if reply.status_code == 400:
            assert body["error"]
            continue
        if hook not in ("sync", "finalize") or mutant.get("finalizing") is True:
            continue
        returned = {(c["metadata"].get("namespace"), c["metadata"]["name"]) for c in body["children"] if c["kind"] == "Job"}
        assert running_jobs_for_current_uri(mutant) <= returned, mutant
