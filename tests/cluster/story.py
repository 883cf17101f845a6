"""One model's story in the cluster tier: its own namespace, its model, what the user does to it,
and what it cost, read from the audit log and the hook proxy, beside what the same story
costs in the simulator (``twins``).
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

import yaml

from tests.cluster import audit
from tests.cluster.tier import MODELS, PLURALS, REPO, Tier, state
from tests.metacontroller.selection import Obj

KINDS = ("BaseModel", "ClusterBaseModel")
"""The two kinds of model, which every story told of both tells in this order."""
SAMPLES = REPO / "metacontroller" / "samples"
CLAIM = "model-storage"
SUB_PATH = "llama"
HF_URI = "hf://mistralai/Mistral-7B-Instruct-v0.3"
LABEL = "ome-basemodel-hook.ome.io/storage"
AUDIT_FLUSH_SECONDS = 1.0
"""The audit log's backend writes each event as the request completes; a moment covers the last ones."""
COLUMNS = ("sync", "finalize", "customize", "label", "create", "update", "delete", "status write", "model write",
           "OME status write", "OME refused")
REPORT: list[tuple[str, str, dict[str, int], dict[str, int], dict[str, Counter[str]]]] = []
"""Every story told this session: (story, kind, real costs, simulated costs, writes per actor)."""


@dataclass
class Story:
    tier: Tier
    kind: str
    slug: str
    started: datetime = field(default_factory=lambda: datetime.now(timezone.utc))
    uids: set[str] = field(default_factory=set)
    """The model's uid and its Jobs', once seen: what the hook's objects and the Jobs' pods are owned by."""
    named: str = ""
    """The model's name, where the story chooses one."""

    @property
    def namespace(self) -> str:
        return f"{self.slug}-{'bm' if self.kind == 'BaseModel' else 'cbm'}"

    @property
    def name(self) -> str:
        """A ClusterBaseModel's name is cluster-wide: it carries the story's namespace."""
        if self.named:
            return self.named
        return "llama" if self.kind == "BaseModel" else f"{self.namespace}-llama"

    @property
    def model_namespace(self) -> str | None:
        return self.namespace if self.kind == "BaseModel" else None

    @property
    def about(self) -> tuple[str, str, str]:
        """The model as the hook proxy names the model a call is about."""
        return self.kind, self.model_namespace or "", self.name

    def uri(self, sub_path: str = SUB_PATH) -> str:
        where = f"{self.namespace}:{CLAIM}" if self.kind == "ClusterBaseModel" else CLAIM
        return f"pvc://{where}/{sub_path}"

    # --- what the user does ---------------------------------------------------------------------

    def namespace_only(self) -> None:
        self.tier.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.namespace}})

    def storage(self, config: str | None = None, bound: bool = True, volume_mode: str = "Filesystem",
                access_modes: tuple[str, ...] = ("ReadOnlyMany",)) -> None:
        self.tier.storage(self.namespace, CLAIM, SUB_PATH, config, bound, volume_mode, access_modes)

    def create(self, uri: str | None = None, as_sample: bool = False, labels: dict[str, str] | None = None,
               fields: dict[str, Any] | None = None) -> None:
        """The model, with only its storage URI (and ``labels``); ``as_sample``, with the rest of the
        spec the docs' sample gives (vendor, version, format, framework), which OME's typed writes
        then leave unchanged; with ``fields``, those spec fields too."""
        metadata: dict[str, Any] = {"name": self.name, **({"namespace": self.namespace} if self.model_namespace else {}),
                                    **({"labels": labels} if labels else {})}
        spec: dict[str, Any] = {}
        if as_sample:
            spec = yaml.safe_load((SAMPLES / "basemodel-pvc.yaml").read_text(encoding="utf-8"))["spec"]
        spec.update(fields or {})
        spec["storage"] = {"storageUri": uri or self.uri()}
        self.tier.apply({"apiVersion": MODELS, "kind": self.kind, "metadata": metadata, "spec": spec})

    def set_uri(self, uri: str) -> None:
        self.tier.plane.kubectl("patch", PLURALS[self.kind], self.name, *self._namespace_flag(), "--type=merge",
                                "--patch", f'{{"spec":{{"storage":{{"storageUri":"{uri}"}}}}}}')

    def touch(self) -> None:
        """Any annotation, as docs/install.md suggests to bring a model's next sync at once."""
        self.tier.plane.kubectl("annotate", PLURALS[self.kind], self.name, *self._namespace_flag(), "--overwrite",
                                f"touched-at={time.time_ns()}")

    def delete(self) -> None:
        self.tier.plane.kubectl("delete", PLURALS[self.kind], self.name, *self._namespace_flag(), "--wait=false")

    def _namespace_flag(self) -> list[str]:
        return ["--namespace", self.namespace] if self.model_namespace else []

    # --- what the cluster says -------------------------------------------------------------------

    def model(self) -> Obj | None:
        return self.tier.model(self.kind, self.name, self.model_namespace)

    def state(self) -> tuple[str, str]:
        return state(self.model())

    def wait_for(self, wanted: tuple[str, str], seconds: float) -> Obj:
        self.tier.wait(lambda: self.state() == wanted, seconds, f"{self.kind} {self.name} {wanted}")
        found = self.model()
        assert found is not None
        return found

    def labelled(self) -> bool:
        return ((self.model() or {}).get("metadata", {}).get("labels") or {}).get(LABEL) == "pvc"

    def children(self) -> list[str]:
        """The kinds of every object the hook made for this model that still exists, and of its Jobs' pods."""
        model = self.model()
        if model is not None:
            self.uids.add(model["metadata"]["uid"])
        owned = [obj for obj in self._candidates() if {owner.get("uid") for owner in obj["metadata"].get("ownerReferences") or []} & self.uids]
        self.uids |= {obj["metadata"]["uid"] for obj in owned if obj["kind"] == "Job"}
        pods = [pod for pod in self.tier.objects("v1", "pods", self.namespace)
                if {owner.get("uid") for owner in pod["metadata"].get("ownerReferences") or []} & self.uids]
        return sorted(obj["kind"] for obj in [*owned, *pods])

    def _candidates(self) -> list[Obj]:
        found = []
        for api_version, resource in (("batch/v1", "jobs"), ("v1", "serviceaccounts"),
                                      ("ome-basemodel-hook.ome.io/v1alpha1", "extractionrecords"),
                                      ("rbac.authorization.k8s.io/v1", "roles"), ("rbac.authorization.k8s.io/v1", "rolebindings")):
            found += self.tier.objects(api_version, resource, self.namespace)
        for resource in ("clusterroles", "clusterrolebindings"):
            found += self.tier.objects("rbac.authorization.k8s.io/v1", resource)
        return found

    def jobs(self) -> list[Obj]:
        return self.tier.objects("batch/v1", "jobs", self.namespace)

    # --- what it cost --------------------------------------------------------------------------------

    @property
    def audited(self) -> audit.Story:
        """The story as the audit log tells its writes apart."""
        return audit.Story(self.kind, self.name, self.namespace)

    def model_writes(self, since: datetime | None = None) -> list[audit.ModelWrite]:
        """Metacontroller's writes of the model outside its status, in order, since ``since``
        (else the story's start)."""
        time.sleep(AUDIT_FLUSH_SECONDS)
        until = datetime.now(timezone.utc) + timedelta(seconds=1)
        return audit.metacontroller_model_writes(self.tier.plane.audit_log, self.audited, since or self.started, until)

    def costs(self) -> tuple[dict[str, int], dict[str, Counter[str]]]:
        """The story's costs in ``COLUMNS``, and its writes per actor, from its start until now."""
        time.sleep(AUDIT_FLUSH_SECONDS)
        until = datetime.now(timezone.utc) + timedelta(seconds=1)
        per_actor = audit.costs(self.tier.plane.audit_log, self.audited, self.started, until)
        proxy = self.tier.proxy
        assert proxy is not None
        about = self.about
        metacontroller = per_actor.get("Metacontroller", Counter())
        ome = per_actor.get("OME's manager", Counter())
        real = {hook: proxy.count(hook, about) for hook in ("sync", "finalize", "customize", "label")}
        real |= {column: metacontroller[column] for column in ("create", "update", "delete", "status write", "model write")}
        real |= {"OME status write": ome["status write accepted"], "OME refused": ome["refused"]}
        return real, per_actor

    def report(self, title: str, simulated: dict[str, int]) -> dict[str, int]:
        """Record the story's costs beside the simulator's for the summary table; the real costs."""
        real, per_actor = self.costs()
        REPORT.append((title, self.kind, real, simulated, per_actor))
        return real
