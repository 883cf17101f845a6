"""The hook's own objects: its Namespace (pod security restricted), Deployment, Service,
PodDisruptionBudget and NetworkPolicy, and the Dockerfile the Deployment's image is built
from, as far as the two must agree (the Dockerfile alone is checked in test_dockerfile.py).
"""

from __future__ import annotations

import json

from tests import dockerfile
from tests.manifests import HOOK_IMAGE, HOOK_NAME, HOOK_NS, Obj, one


def matches(selector: Obj, labels: dict[str, str]) -> bool:
    """matchLabels-only LabelSelector matching (the manifests use no expressions)."""
    assert set(selector) <= {"matchLabels"}, selector
    return all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())


def test_hook_namespace_enforces_pod_security_restricted(rendered):
    labels = one(rendered, "Namespace", HOOK_NS)["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"


def test_deployment_runs_the_hook_image_with_two_replicas_and_probes(deployment, container):
    assert deployment["spec"]["replicas"] == 2
    assert container["image"] == HOOK_IMAGE
    assert container["command"] + container["args"] == [
        "basemodel-hook",
        "serve",
        "--bind",
        "0.0.0.0:8080",
    ]
    assert container["ports"] == [{"name": "http", "containerPort": 8080, "protocol": "TCP"}]
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    for kind in ("requests", "limits"):
        assert set(container["resources"][kind]) == {"cpu", "memory"}, kind


def test_deployment_selector_is_stable_and_matches_its_pods(deployment):
    selector = deployment["spec"]["selector"]
    assert selector == {
        "matchLabels": {
            "app.kubernetes.io/name": HOOK_NAME,
            "app.kubernetes.io/component": "webhook",
        }
    }
    assert matches(selector, deployment["spec"]["template"]["metadata"]["labels"])


def test_deployment_pod_meets_pod_security_restricted(pod_spec):
    pod_sc = pod_spec["securityContext"]
    assert pod_sc["runAsNonRoot"] is True
    assert pod_sc["runAsUser"] == 10001 and pod_sc["runAsGroup"] == 10001
    assert pod_sc["seccompProfile"] == {"type": "RuntimeDefault"}
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        assert not pod_spec.get(key), key
    allowed_volumes = {
        "configMap", "csi", "downwardAPI", "emptyDir", "ephemeral",
        "persistentVolumeClaim", "projected", "secret",
    }
    for volume in pod_spec.get("volumes", []):
        assert set(volume) - {"name"} <= allowed_volumes, volume
    containers = pod_spec["containers"] + pod_spec.get("initContainers", [])
    for c in containers:
        sc = c["securityContext"]
        assert sc["allowPrivilegeEscalation"] is False, c["name"]
        assert sc["capabilities"]["drop"] == ["ALL"], c["name"]
        assert set(sc["capabilities"].get("add", [])) <= {"NET_BIND_SERVICE"}, c["name"]
        assert sc["readOnlyRootFilesystem"] is True, c["name"]
        assert not sc.get("privileged"), c["name"]
        assert sc.get("runAsUser", 10001) != 0, c["name"]
        assert sc.get("seccompProfile", {"type": "RuntimeDefault"})["type"] in (
            "RuntimeDefault",
            "Localhost",
        )


def test_deployment_writes_only_to_a_tmp_emptydir_holding_the_metrics_dir(pod_spec, container):
    volumes = {v["name"]: v for v in pod_spec["volumes"]}
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    assert "emptyDir" in volumes[mounts["/tmp"]["name"]]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["PROMETHEUS_MULTIPROC_DIR"] == "/tmp/metrics"


def test_deployment_pins_the_worker_count_instead_of_following_the_nodes_cpus(container):
    # `serve` defaults to 2 x node CPUs + 1 workers, which on a large node would
    # not fit the container's memory limit.
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert 1 <= int(env["HOOK_WORKERS"]) <= 4


def test_deployment_has_no_api_token_and_spreads_across_nodes(rendered, pod_spec, deployment):
    assert pod_spec["automountServiceAccountToken"] is False
    sa = one(rendered, "ServiceAccount", pod_spec["serviceAccountName"])
    assert sa["automountServiceAccountToken"] is False
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    spread = [
        t for t in pod_spec.get("topologySpreadConstraints", [])
        if t["topologyKey"] == "kubernetes.io/hostname" and matches(t["labelSelector"], pod_labels)
    ]
    anti = pod_spec.get("affinity", {}).get("podAntiAffinity")
    assert spread or anti, "replicas are not spread across nodes"


def test_service_and_pdb_select_the_hook_pods(rendered, deployment, container):
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    service = one(rendered, "Service", HOOK_NAME)
    assert matches({"matchLabels": service["spec"]["selector"]}, pod_labels)
    (port,) = service["spec"]["ports"]
    assert port["port"] == 80
    assert port["targetPort"] in {p["name"] for p in container["ports"]}
    pdb = one(rendered, "PodDisruptionBudget", HOOK_NAME)
    assert pdb["spec"]["minAvailable"] == 1
    assert matches(pdb["spec"]["selector"], pod_labels)


def test_networkpolicy_admits_only_metacontroller_to_port_8080(rendered, deployment):
    policy = one(rendered, "NetworkPolicy", HOOK_NAME)["spec"]
    assert matches(policy["podSelector"], deployment["spec"]["template"]["metadata"]["labels"])
    assert "Ingress" in policy["policyTypes"]
    (rule,) = policy["ingress"]
    assert rule["ports"] == [{"port": 8080, "protocol": "TCP"}]
    assert rule["from"], "an empty `from` admits everyone"
    for peer in rule["from"]:
        assert set(peer) == {"namespaceSelector", "podSelector"}, peer
        assert peer["namespaceSelector"] == {
            "matchLabels": {"kubernetes.io/metadata.name": "metacontroller"}
        }
        assert peer["podSelector"] == {"matchLabels": {"app.kubernetes.io/name": "metacontroller"}}


def test_dockerfile_runs_the_console_script_as_non_root_like_the_deployment(container):
    instructions = dockerfile.instructions()
    froms = [rest for word, rest in instructions if word == "FROM"]
    assert len(froms) >= 2, "multi-stage build expected"
    args = dict(
        rest.split("=", 1) for word, rest in instructions if word == "ARG" and "=" in rest
    )
    assert args.get("PYTHON_IMAGE") == "python:3.11-slim"
    final = max(i for i, (word, _) in enumerate(instructions) if word == "FROM")
    final_stage = instructions[final:]
    words = [w for w, _ in final_stage]
    assert ("USER", "10001:10001") in final_stage or ("USER", "10001") in final_stage
    assert words.index("USER") > max(i for i, w in enumerate(words) if w in ("COPY", "RUN"))
    assert not [r for w, r in final_stage if w == "RUN"], "no build steps in the final stage"
    entrypoint = json.loads(dict(final_stage)["ENTRYPOINT"])
    cmd = json.loads(dict(final_stage)["CMD"])
    assert entrypoint == container["command"] == ["basemodel-hook"]
    assert cmd == container["args"]
    assert ("EXPOSE", "8080") in final_stage
    env = " ".join(r for w, r in final_stage if w == "ENV")
    assert "PYTHONDONTWRITEBYTECODE=1" in env and "PYTHONUNBUFFERED=1" in env
