"""Prometheus metrics that stay correct under several gunicorn worker processes.

With ``PROMETHEUS_MULTIPROC_DIR`` set (``basemodel-hook serve`` sets it), every worker
writes its samples to files there and ``/metrics`` merges them, so a scrape sees the
whole server rather than whichever worker answered it.
"""

from __future__ import annotations

import os
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest, multiprocess
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.metrics import MetricWrapperBase

CONTENT_TYPE = CONTENT_TYPE_LATEST


class Metrics:
    """The hook's metrics, on a registry of their own so each app (and test) starts clean."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self._series: dict[tuple[MetricWrapperBase, tuple[str, ...]], Any] = {}
        self.requests = Counter(
            "basemodel_hook_requests",
            "Hook requests answered, by hook and outcome (ok, bad_request, unauthorized, too_large, error).",
            ["hook", "outcome"],
            registry=self.registry,
        )
        # Up to the CompositeControllers' 10 s webhook timeout, so an alert can tell a
        # p99 that nears it (metacontroller/monitoring/prometheusrule.yaml).
        self.latency = Histogram(
            "basemodel_hook_request_duration_seconds",
            "Time to answer a hook request, by hook and outcome.",
            ["hook", "outcome"],
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
            registry=self.registry,
        )
        self.decisions = Counter(
            "basemodel_hook_decisions",
            "Sync and finalize decisions, by flow, model state and Ready reason.",
            ["flow", "state", "reason"],
            registry=self.registry,
        )
        # Nonzero once OME serves pvc:// models itself: each answer that handed a pvc://
        # model back to OME's own PVC backend (docs/install.md, moving to it).
        self.stepped_aside = Counter(
            "basemodel_hook_stepped_aside",
            "Answers that handed a pvc:// model back because OME serves pvc:// models itself, by hook.",
            ["hook"],
            registry=self.registry,
        )
        self.errors = Counter(
            "basemodel_hook_errors",
            "Unexpected failures answered with a 5xx, by hook and exception type.",
            ["hook", "error"],
            registry=self.registry,
        )

    def series(self, metric: MetricWrapperBase, *labels: str) -> Any:
        """``metric.labels(*labels)``, looked up once: ``labels()`` checks and locks on
        every call, and every request counts in the same few series."""
        key = (metric, labels)
        found = self._series.get(key)
        if found is None:
            found = self._series[key] = metric.labels(*labels)
        return found

    def exposition(self) -> bytes:
        """The text format; merged across worker processes when they share a directory."""
        if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
            merged = CollectorRegistry()
            multiprocess.MultiProcessCollector(merged)
            return generate_latest(merged)
        return generate_latest(self.registry)
