"""Replay every saved Metacontroller request and hold the answers to their promises."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hooks.upstream_backend import status_left_to_ome
from tests import golden
from tests.metacontroller.feedback import apply
from tests.schemas import KUBERNETES_VERSIONS, child_errors, status_errors

CASES = golden.cases()
IDS = [f"{golden.hook_of(path)}/{path.name.removesuffix('.request.json')}" for path in CASES]
ANSWER_KEYS = {
    "sync": {"status", "children", "resyncAfterSeconds"},
    "finalize": {"status", "children", "resyncAfterSeconds", "finalized"},
    "customize": {"relatedResources"},
    "label": {"labels", "annotations", "resyncAfterSeconds"},
    "label-customize": {"relatedResources"},
}


@pytest.fixture(scope="module")
def answers() -> dict[Path, tuple[int, bytes]]:
    test_client = golden.client()
    return {path: golden.answer(path, test_client) for path in CASES}


def test_there_are_fixtures_for_every_hook() -> None:
    assert {golden.hook_of(path) for path in CASES} == set(golden.HOOKS)


@pytest.mark.parametrize("request_file", CASES, ids=IDS)
def test_answer_matches_golden_file(request_file: Path, answers: dict[Path, tuple[int, bytes]]) -> None:
    status, body = answers[request_file]
    assert status == 200, body
    assert json.loads(body) == golden.load(golden.response_file(request_file))


@pytest.mark.parametrize("request_file", CASES, ids=IDS)
def test_same_request_same_clock_gives_same_bytes(request_file: Path, answers: dict[Path, tuple[int, bytes]]) -> None:
    assert golden.answer(request_file, golden.client()) == answers[request_file]


@pytest.mark.parametrize("request_file", CASES, ids=IDS)
def test_answer_uses_only_fields_metacontroller_accepts(request_file: Path, answers: dict[Path, tuple[int, bytes]]) -> None:
    body = json.loads(answers[request_file][1])
    assert set(body) <= ANSWER_KEYS[golden.hook_of(request_file)]
    if "resyncAfterSeconds" in body:
        assert body["resyncAfterSeconds"] > 0


SYNC_CASES = [path for path in CASES if golden.hook_of(path) in ("sync", "finalize")]
SYNC_IDS = [f"{golden.hook_of(path)}/{path.name.removesuffix('.request.json')}" for path in SYNC_CASES]


@pytest.mark.parametrize("request_file", SYNC_CASES, ids=SYNC_IDS)
@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_every_child_validates_against_kubernetes_schema(
    request_file: Path, version: str, answers: dict[Path, tuple[int, bytes]]
) -> None:
    for child in json.loads(answers[request_file][1])["children"]:
        assert child_errors(child, version) == [], child["metadata"]["name"]


@pytest.mark.parametrize("request_file", SYNC_CASES, ids=SYNC_IDS)
def test_status_validates_against_shipped_crd_and_loses_nothing_to_pruning(
    request_file: Path, answers: dict[Path, tuple[int, bytes]]
) -> None:
    request = golden.load(request_file)
    status = json.loads(answers[request_file][1])["status"]
    if golden.hands_omes_status_back(request):
        assert status == status_left_to_ome(request["parent"]["status"]), "OME's status, as its backend wrote it"
        return
    status["observedGeneration"] = request["parent"]["metadata"].get("generation", 1)
    assert status_errors(request["parent"]["kind"], status) == []


def observed_children(request: dict[str, Any]) -> set[tuple[str, str]]:
    return {(type_key, key) for type_key, group in request.get("children", {}).items() for key in group}


@pytest.mark.parametrize("request_file", SYNC_CASES, ids=SYNC_IDS)
def test_feeding_the_answer_back_reaches_a_fixpoint(request_file: Path) -> None:
    """Once the desired children exist as observed and nothing else changes, the answer
    repeats itself: a steady state costs Metacontroller no write. A round that creates or
    deletes no child must already repeat the previous answer."""
    request: dict[str, Any] = golden.load(request_file)
    test_client = golden.client()
    hook = golden.hook_of(request_file)
    response = test_client.post(f"/{hook}", json=request).get_json()
    for _ in range(4):
        following_request = apply(request, response, golden.FIXTURE_NOW)
        following = test_client.post(f"/{hook}", json=following_request).get_json()
        if observed_children(following_request) == observed_children(request) or following == response:
            assert following == response, json.dumps(following)[:2000]
            return
        request, response = following_request, following
    pytest.fail(f"children still changing after 4 rounds; last answer: {json.dumps(response)[:2000]}")


CUSTOMIZE_CASES = [path for path in CASES if golden.hook_of(path) in ("customize", "label-customize")]
CLUSTER_SCOPED_RESOURCES = {"clusterroles", "clusterrolebindings"}


@pytest.mark.parametrize("request_file", CUSTOMIZE_CASES, ids=[path.name for path in CUSTOMIZE_CASES])
def test_related_rules_obey_metacontrollers_combination_rules(
    request_file: Path, answers: dict[Path, tuple[int, bytes]]
) -> None:
    """Metacontroller fails the sync on a rule that mixes selection modes, and a ``names``
    rule without a namespace would match that name in every namespace."""
    allowed = {"apiVersion", "resource", "labelSelector", "namespaceSelector", "namespace", "names"}
    for rule in json.loads(answers[request_file][1])["relatedResources"]:
        assert set(rule) <= allowed and rule["apiVersion"] and rule["resource"]
        assert not ("names" in rule and ({"labelSelector", "namespaceSelector"} & set(rule)))
        assert not ("namespace" in rule and "namespaceSelector" in rule)
        if "names" in rule and rule["resource"] not in CLUSTER_SCOPED_RESOURCES:
            assert rule.get("namespace")
