"""The node flow at cluster scale: bytes and time per model sync, before and after the node index.

Builds a synthetic cluster (``--nodes`` × ``--models``, every node holding every model:
the worst case): Nodes of about 20 KB as a real cluster stores them (images,
managedFields), one model-status ConfigMap per node with an entry of about 1 KB per model,
as OME's agents write them. Then, for one model:

- before: the sync request of the design that read every ConfigMap and every Node (the
  baseline commit, run from ``git archive``);
- after: the index is built by calling the DecoratorController's hook the way
  Metacontroller does (each ConfigMap with its Node, then again with the attachments it
  asked for, as the API server stores them: last-applied annotation, managedFields,
  ownerReferences), and the model's request holds its own entries and the summary.

Each design's core (``hooks.sync.sync`` on the parsed request) and, apart, the parsing
of its request (orjson, as the HTTP shell does) are timed in a child process of their
own, the two designs taking turns for ``--rounds`` rounds; the table shows the median of
every run of every round. It also prints what the index stores at the
largest size against the ConfigMaps it indexes, and what a decorator sync costs (the
price of a Node heartbeat, which no longer wakes any model).

    python bench/node_scale.py [--rounds 3] [--runs 5] [--baseline 12624f6]
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import os
import statistics
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import time
from datetime import datetime, timezone
from io import BytesIO
from pathlib import Path
from typing import Any

import orjson
import yaml

from hooks.nodes import decorator
from hooks.nodes.index_objects import (
    API_VERSION,
    GROUP_LABEL,
    GROUPS_PARENT_LABEL,
    MODEL_LABEL,
    NODE_GROUPS,
    NODE_INDEX_SUMMARIES,
    NODE_INDEXES,
    NODE_MODEL_STATUSES,
    model_label,
)
from hooks.nodes.ome_keys import STATUS_LABEL, configmap_key
from hooks.settings import Settings
from hooks.sync import sync

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures"
MODEL_FIXTURE = FIXTURES / "sync" / "basemodel-hf-ready-on-some-nodes.request.json"
NODE_FIXTURE = FIXTURES / "nodes" / "sync" / "configmap-first-sync-indexes-the-node.request.json"
BASELINE = "12624f6"  # the last commit whose node flow read every ConfigMap and every Node
NOW = datetime(2026, 11, 30, 12, 0, 0, tzinfo=timezone.utc)
CREATED = "2026-11-30T11:30:00Z"
INDEX_CONTROLLER = "ome-node-index"
SIZES = [(10, 10), (10, 100), (100, 10), (100, 100), (1000, 10), (1000, 100)]
CHILD = """
import json, sys, time
from datetime import datetime, timezone
import orjson, hooks
from hooks.settings import Settings
from hooks.sync import sync
raw = open(sys.argv[1], "rb").read()
now = datetime(2026, 11, 30, 12, 0, 0, tzinfo=timezone.utc)
parse, core = [], []
for _ in range(int(sys.argv[2])):
    started = time.perf_counter()
    body = orjson.loads(raw)
    parsed = time.perf_counter()
    sync(body, Settings(), now)
    parse.append(parsed - started)
    core.append(time.perf_counter() - parsed)
print(json.dumps({"hooks": hooks.__file__, "parse": parse, "core": core}))
"""

def compact(obj: Any) -> bytes:
    return orjson.dumps(obj)


def uid(seed: str) -> str:
    digest = hashlib.sha256(seed.encode()).hexdigest()
    return f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"


def fields_v1(value: Any) -> dict[str, Any]:
    """managedFields' FieldsV1 for what one manager set: objects by field, lists atomic."""
    if not isinstance(value, dict):
        return {}
    return {".": {}, **{f"f:{key}": fields_v1(item) for key, item in value.items()}}


def stored(desired: dict[str, Any], owner: dict[str, Any], serial: int) -> dict[str, Any]:
    """An attachment as the API server returns it after Metacontroller created it.

    Metacontroller adds its decorator annotation, saves the object so far as the
    last-applied annotation, appends the controllerRef and creates it; the API server
    adds identity, timestamps and the managedFields of that create."""
    obj = copy.deepcopy(desired)
    metadata = obj["metadata"]
    metadata.setdefault("annotations", {})["metacontroller.k8s.io/decorator-controller"] = INDEX_CONTROLLER
    metadata["annotations"]["metacontroller.k8s.io/last-applied-configuration"] = compact(obj).decode()
    owner_uid = owner["metadata"]["uid"]
    metadata["ownerReferences"] = [{
        "apiVersion": owner["apiVersion"], "blockOwnerDeletion": True, "controller": True,
        "kind": owner["kind"], "name": owner["metadata"]["name"], "uid": owner_uid,
    }]
    managed = {
        "f:metadata": {
            "f:annotations": fields_v1(metadata["annotations"]),
            **({"f:labels": fields_v1(metadata["labels"])} if "labels" in metadata else {}),
            "f:ownerReferences": {".": {}, f'k:{{"uid":"{owner_uid}"}}': {}},
        },
        **({"f:spec": fields_v1(obj["spec"])} if "spec" in obj else {}),
    }
    metadata.update({
        "creationTimestamp": CREATED,
        "generation": 1,
        "managedFields": [{"apiVersion": obj["apiVersion"], "fieldsType": "FieldsV1", "fieldsV1": managed,
                           "manager": "metacontroller", "operation": "Update", "time": CREATED}],
        "resourceVersion": str(60000000 + serial),
        "uid": uid(f"{obj['kind']}/{metadata['name']}"),
    })
    return json.loads(orjson.dumps(obj, option=orjson.OPT_SORT_KEYS))


def server_side_applied(obj: dict[str, Any]) -> dict[str, Any]:
    """The same object had Metacontroller run with ``--apply-strategy=server-side-apply``:
    no last-applied copy of itself, and an ``Apply`` managedFields entry."""
    applied = copy.deepcopy(obj)
    metadata = applied["metadata"]
    del metadata["annotations"]["metacontroller.k8s.io/last-applied-configuration"]
    managed = metadata["managedFields"][0]
    del managed["fieldsV1"]["f:metadata"]["f:annotations"]["f:metacontroller.k8s.io/last-applied-configuration"]
    managed["operation"] = "Apply"
    return applied


def node_object(template: dict[str, Any], name: str) -> dict[str, Any]:
    """A Node as a GPU node of a real cluster stores it: about 20 KB."""
    node = copy.deepcopy(template)
    node["metadata"].update({"name": name, "uid": uid(f"node/{name}")})
    node["metadata"]["labels"]["kubernetes.io/hostname"] = name
    node["status"]["images"] = [
        {"names": [f"iad.ocir.io/tenancy/serving/image-{i}@sha256:{hashlib.sha256(str(i).encode()).hexdigest()}",
                   f"iad.ocir.io/tenancy/serving/image-{i}:v1.{i}.0"], "sizeBytes": 1_000_000_000 + i}
        for i in range(70)
    ]
    node["status"]["volumesInUse"] = [f"kubernetes.io/csi/blockvolume.csi.oraclecloud.com^ocid1.volume.{i}" for i in range(8)]
    node["metadata"]["managedFields"].append({
        "apiVersion": "v1", "fieldsType": "FieldsV1", "manager": "kubelet", "operation": "Update",
        "subresource": "status", "time": "2026-11-30T11:59:55Z",
        "fieldsV1": {"f:status": {
            "f:allocatable": fields_v1(node["status"]["allocatable"]), "f:capacity": fields_v1(node["status"]["capacity"]),
            "f:conditions": {f'k:{{"type":"{c["type"]}"}}': fields_v1(c) for c in node["status"]["conditions"]},
            "f:images": {}, "f:nodeInfo": fields_v1(node["status"]["nodeInfo"]), "f:volumesInUse": {},
        }},
    })
    return node


def configmap(template: dict[str, Any], node: str, entries: dict[str, str]) -> dict[str, Any]:
    """An agent's ConfigMap: one entry of about 1 KB per model, and managedFields naming each key."""
    cm = copy.deepcopy(template)
    cm["metadata"].update({"name": node, "uid": uid(f"configmap/{node}"), "labels": {STATUS_LABEL: "true", "node": node}})
    cm["metadata"]["annotations"]["models.ome.io/node-name"] = node
    cm["metadata"]["managedFields"] = [{
        "apiVersion": "v1", "fieldsType": "FieldsV1", "manager": "model-agent", "operation": "Update",
        "time": "2026-11-30T11:58:00Z",
        "fieldsV1": {"f:data": {".": {}, **{f"f:{key}": {} for key in entries}},
                     "f:metadata": {"f:annotations": {".": {}, "f:models.ome.io/managed-by": {}, "f:models.ome.io/node-name": {}},
                                    "f:labels": {".": {}, "f:models.ome/basemodel-status": {}, "f:node": {}}}},
    }]
    cm["data"] = entries
    return cm


def model_entries(template_entry: str, parent: dict[str, Any], models: int) -> dict[str, str]:
    """The measured model first, then more BaseModels in its namespace; about 1 KB each."""
    namespace = parent["metadata"]["namespace"]
    names = [parent["metadata"]["name"], *(f"model-{i:03d}-instruct" for i in range(1, models))]
    entry = json.loads(template_entry)
    return {configmap_key(namespace, name): compact({**entry, "name": name}).decode() for name in names}


class Index:
    """The node index as Metacontroller builds it from the hook's answers, stored objects only."""

    def __init__(self, controller: dict[str, Any], settings: Settings) -> None:
        self.controller = controller
        self.settings = settings
        self.node_indexes: list[dict[str, Any]] = []
        self.groups: list[dict[str, Any]] = []
        self.entries: list[dict[str, Any]] = []
        self.summary: dict[str, Any] = {}
        self.request_bytes: dict[str, int] = {}
        self.serial = 0

    def store(self, desired: dict[str, Any], owner: dict[str, Any]) -> dict[str, Any]:
        self.serial += 1
        return stored(desired, owner, self.serial)

    def call(self, what: str, parent: dict[str, Any], children: dict[str, Any], related: dict[str, Any]) -> dict[str, Any]:
        request = {"controller": self.controller, "parent": parent, "children": children, "related": related, "finalizing": False}
        self.request_bytes[what] = max(self.request_bytes.get(what, 0), len(compact(request)))
        return decorator.sync(request, self.settings)

    def sync_node(self, cm: dict[str, Any], node: dict[str, Any] | None) -> None:
        """A ConfigMap's sync: its NodeIndex (what a Node heartbeat costs, and what an entry change starts with)."""
        related = {"Node.v1": {node["metadata"]["name"]: node} if node else {}}
        children = {NODE_INDEXES: {}, NODE_GROUPS: {}, NODE_MODEL_STATUSES: {}, NODE_INDEX_SUMMARIES: {}}
        (desired,) = self.call("node", cm, children, related)["attachments"]
        self.node_indexes.append(self.store(desired, cm))

    def sync_namespace(self, namespace: dict[str, Any]) -> None:
        """The groups (as they are: their status is their own sync's) and the summary of their statuses."""
        children = {NODE_INDEXES: {}, NODE_GROUPS: {f"ome/{g['metadata']['name']}": g for g in self.groups},
                    NODE_MODEL_STATUSES: {}, NODE_INDEX_SUMMARIES: {}}
        *groups, summary = self.call("namespace", namespace, children, {})["attachments"]
        if not self.groups:
            self.groups = [self.store(desired, namespace) for desired in groups]
        self.summary = self.store(summary, namespace)

    def sync_group(self, group: dict[str, Any]) -> dict[str, Any]:
        """Two syncs, as the objects' creation wakes the group again; then the group as
        stored with its status (a status-subresource write of its own managedFields)."""
        name = group["metadata"]["name"]
        related = {NODE_INDEXES: {f"{obj['metadata']['namespace']}/{obj['metadata']['name']}": obj for obj in self.node_indexes
                                  if obj["metadata"]["labels"][GROUP_LABEL] == name}}
        children: dict[str, dict[str, Any]] = {NODE_INDEXES: {}, NODE_GROUPS: {}, NODE_MODEL_STATUSES: {}, NODE_INDEX_SUMMARIES: {}}
        for _ in range(2):
            answer = self.call("group", group, children, related)
            children[NODE_MODEL_STATUSES] = {f"{obj['metadata']['namespace']}/{obj['metadata']['name']}": self.store(obj, group)
                                             for obj in answer["attachments"]}
        self.entries += children[NODE_MODEL_STATUSES].values()
        group = {**group, "status": answer["status"]}
        group["metadata"] = {**group["metadata"], "managedFields": [*group["metadata"]["managedFields"], {
            "apiVersion": API_VERSION, "fieldsType": "FieldsV1", "fieldsV1": {"f:status": fields_v1(answer["status"])},
            "manager": "metacontroller", "operation": "Update", "subresource": "status", "time": CREATED}]}
        return group

    def build(self, configmaps: list[dict[str, Any]], nodes: list[dict[str, Any]], namespace: dict[str, Any]) -> None:
        for cm, node in zip(configmaps, nodes, strict=True):
            self.sync_node(cm, node)
        self.sync_namespace(namespace)
        self.groups = [self.sync_group(group) for group in self.groups]
        self.sync_namespace(namespace)

    def stored_objects(self) -> list[dict[str, Any]]:
        return [*self.node_indexes, *self.groups, *self.entries, self.summary]


def index_namespace() -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": "ome-basemodel-hook", "uid": uid("namespace/ome-basemodel-hook"), "resourceVersion": "1200",
        "creationTimestamp": "2026-11-02T09:14:00Z",
        "labels": {"kubernetes.io/metadata.name": "ome-basemodel-hook", GROUPS_PARENT_LABEL: "true"}}}


def decorator_controller() -> dict[str, Any]:
    manifest = yaml.safe_load((REPO / "metacontroller" / "decoratorcontroller.yaml").read_text(encoding="utf-8"))
    manifest["metadata"].update({"uid": uid("dc"), "resourceVersion": "48215531", "generation": 1})
    return manifest


def build(nodes: int, models: int) -> dict[str, Any]:
    """Both requests for the first model, the index, and what it cost to store."""
    fixture = json.loads(MODEL_FIXTURE.read_text(encoding="utf-8"))
    node_fixture = json.loads(NODE_FIXTURE.read_text(encoding="utf-8"))
    node_template = node_fixture["related"]["Node.v1"]["10.0.10.105"]
    cm_template = node_fixture["parent"]
    parent = fixture["parent"]
    entries = model_entries(cm_template["data"]["models.basemodel.llama-3.1-8b-instruct"], parent, models)
    names = [f"10.0.{i // 250}.{i % 250 + 1}" for i in range(nodes)]
    node_objects = [node_object(node_template, name) for name in names]
    configmaps = [configmap(cm_template, name, entries) for name in names]
    settings = Settings()
    index = Index(decorator_controller(), settings)
    index.build(configmaps, node_objects, index_namespace())
    before = {**fixture, "related": {
        "ConfigMap.v1": {f"ome/{cm['metadata']['name']}": cm for cm in configmaps},
        "Node.v1": {node["metadata"]["name"]: node for node in node_objects}}}
    label = model_label(configmap_key(parent["metadata"]["namespace"], parent["metadata"]["name"]))
    after = {**fixture, "related": {
        NODE_MODEL_STATUSES: {f"ome/{e['metadata']['name']}": e for e in index.entries
                              if e["metadata"]["labels"][MODEL_LABEL] == label},
        NODE_INDEX_SUMMARIES: {"ome/nodes": index.summary}}}
    steady = {**parent, "status": sync(after, settings, NOW).response["status"]}
    before["parent"] = after["parent"] = steady
    return {
        "before": before, "after": after, "index": index,
        "configmap_bytes": sum(len(compact(cm)) for cm in configmaps),
        "node_bytes": sum(len(compact(node)) for node in node_objects) // nodes,
    }


def extract_baseline(commit: str, target: str) -> None:
    """The baseline's ``hooks`` package, extracted from git into ``target``."""
    archive = subprocess.run(["git", "-C", str(REPO), "archive", commit, "hooks"], capture_output=True, check=True).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(target, filter="data")


def time_core(tree: str, request_file: str, runs: int) -> dict[str, list[float]]:
    """One child process: parse the request and run the core, ``runs`` times, timing each.

    Without ``site`` (``-S``) the editable install's import hook is not loaded, and the
    child runs outside the repository, so ``hooks`` comes from ``tree`` and only the
    dependencies from site-packages."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([tree, sysconfig.get_paths()["purelib"]])}
    out = subprocess.run([sys.executable, "-S", "-c", CHILD, request_file, str(runs)], env=env,
                         cwd=tempfile.gettempdir(), capture_output=True, check=True, text=True).stdout
    result = json.loads(out)
    assert result["hooks"].startswith(tree), result["hooks"]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds per size")
    parser.add_argument("--runs", type=int, default=5, help="timed core calls per round and design")
    parser.add_argument("--baseline", default=BASELINE, help="commit of the design before the node index")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="node-scale-") as workdir:
        extract_baseline(args.baseline, str(Path(workdir, "baseline")))
        measure({"before": str(Path(workdir, "baseline")), "after": str(REPO)}, workdir, args.rounds, args.runs)


def measure(trees: dict[str, str], workdir: str, rounds: int, runs: int) -> None:
    """The table, then what the index stores at the largest size."""
    print(f"{'nodes':>5} {'models':>6} | {'before MiB':>10} {'after MiB':>9} {'ratio':>6} | "
          f"{'before ms':>9} {'after ms':>8} {'ratio':>6} | {'parse before':>12} {'after ms':>8}")
    largest: dict[str, Any] = {}
    stores: list[tuple[int, int, Index, int]] = []
    for nodes, models in SIZES:
        built = build(nodes, models)
        sizes = {}
        times: dict[str, dict[str, list[float]]] = {name: {"parse": [], "core": []} for name in trees}
        for name in trees:
            path = Path(workdir, f"{name}-{nodes}-{models}.json")
            path.write_bytes(compact(built[name]))
            sizes[name] = path.stat().st_size
        for _ in range(rounds):
            for name, tree in trees.items():
                result = time_core(tree, str(Path(workdir, f"{name}-{nodes}-{models}.json")), runs)
                for part in ("parse", "core"):
                    times[name][part] += result[part]
        core = {name: statistics.median(parts["core"]) * 1000 for name, parts in times.items()}
        parse = {name: statistics.median(parts["parse"]) * 1000 for name, parts in times.items()}
        print(f"{nodes:5} {models:6} | {sizes['before'] / 2**20:10.2f} {sizes['after'] / 2**20:9.3f} "
              f"{sizes['before'] / sizes['after']:5.0f}x | {core['before']:9.2f} {core['after']:8.2f} "
              f"{core['before'] / core['after']:5.1f}x | {parse['before']:12.1f} {parse['after']:8.1f}")
        largest = {**built, "nodes": nodes, "models": models}
        stores.append((nodes, models, built["index"], built["configmap_bytes"]))
    print("\nwhat the index stores (dynamic apply; with --apply-strategy=server-side-apply, no last-applied copy):")
    print(f"{'nodes':>5} {'models':>6} | {'NodeIndex':>9} {'NodeGroup':>9} {'NodeModelStatus':>15} (+1 summary) | "
          f"{'index MiB':>9} {'ConfigMaps MiB':>14} {'ratio':>6} | {'SSA MiB':>7} {'ratio':>6}")
    for nodes, models, index, configmap_bytes in stores:
        objects = index.stored_objects()
        total = sum(len(compact(obj)) for obj in objects)
        applied = sum(len(compact(server_side_applied(obj))) for obj in objects)
        print(f"{nodes:5} {models:6} | {len(index.node_indexes):9} {len(index.groups):9} {len(index.entries):15}              | "
              f"{total / 2**20:9.2f} {configmap_bytes / 2**20:14.2f} {total / configmap_bytes:5.2f}x | "
              f"{applied / 2**20:7.2f} {applied / configmap_bytes:5.2f}x")
    index = largest["index"]
    print(f"\nat {largest['nodes']} nodes x {largest['models']} models, the index's own syncs (request bytes, the largest):")
    print(f"  a ConfigMap's (a Node heartbeat, an entry change): {index.request_bytes['node'] / 1024:.0f} KiB; "
          f"a group's (after an entry change): {index.request_bytes['group'] / 1024:.0f} KiB; "
          f"the Namespace's (a group's status changed): {index.request_bytes['namespace'] / 1024:.0f} KiB; "
          f"the summary {len(compact(index.summary)) / 1024:.0f} KiB; Nodes average {largest['node_bytes'] / 1024:.1f} KiB")


if __name__ == "__main__":
    started = time.perf_counter()
    main()
    print(f"({time.perf_counter() - started:.0f} s)")
