"""Requests about the metadata Job, made from the golden fixtures, and what to read in an
answer: the pure core's tests and the tests that feed its answers back share them."""

from __future__ import annotations

from typing import Any

from tests import golden


def rbac_ready() -> dict[str, Any]:
    """A Bound PVC whose ServiceAccount, Role and RoleBinding exist: the Job is due."""
    return golden.load(golden.FIXTURES / "sync" / "basemodel-rbac-ready-creates-job.request.json")

def kinds(response: dict[str, Any]) -> list[str]:
    return [child["kind"] for child in response["children"]]

def condition(response: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(item for item in response["status"]["conditions"] if item["type"] == kind)

def waiting_pod(job: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{job['metadata']['name']}-x7k2p",
            "namespace": job["metadata"]["namespace"],
            "labels": {"batch.kubernetes.io/job-name": job["metadata"]["name"], "job-name": job["metadata"]["name"]},
        },
        "status": {
            "phase": "Pending",
            "containerStatuses": [
                {
                    "name": "model-metadata",
                    "ready": False,
                    "restartCount": 0,
                    "image": "ghcr.io/moirai-internal/ome-agent:v0.1.5",
                    "imageID": "",
                    "state": {"waiting": {"reason": "ImagePullBackOff", "message": 'Back-off pulling image "ghcr.io/moirai-internal/ome-agent:v0.1.5"'}},
                }
            ],
        },
    }

def deadline_exceeded() -> dict[str, Any]:
    return golden.load(golden.FIXTURES / "sync" / "basemodel-job-deadline-exceeded.request.json")
