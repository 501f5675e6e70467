"""deploy/k8s: every overlay rendered by `kubectl kustomize` and every object validated against Kubernetes's
own schema (kubernetes-validate) or, for prometheus-operator's ServiceMonitor and PrometheusRule, which it does
not know, by a structural check; then what the manifests promise: every pod's security context, no secret in
the render, one beat replaced by Recreate, the agent on GPU nodes only and reachable by Prometheus only, and a
PrometheusRule whose groups are deploy/prometheus/rules.yml's.

Two files are generated from others, and these tests fail when either is stale:

    .venv/bin/python tests/deploy/test_k8s_manifests.py --write-prometheusrule   # from deploy/prometheus/rules.yml
    .venv/bin/python tests/deploy/test_k8s_manifests.py --write-agent-daemonset  # agent/deploy/daemonset.yaml

kubectl is Debian's `kubernetes-client` (scripts/bootstrap.sh installs it). Without it these tests skip, except
under CI (CI=true), where they fail.
"""

from __future__ import annotations

import argparse
import functools
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
RULES = ROOT / "deploy" / "prometheus" / "rules.yml"
PROMETHEUS_RULE = K8S / "base" / "app" / "prometheusrule.yaml"
AGENT_DAEMONSET = ROOT / "agent" / "deploy" / "daemonset.yaml"
OVERLAYS = ("production", "demo")
# Kubernetes versions the objects must be valid in: the newest kubernetes-validate knows, and an older one
# still in wide use.
K8S_VERSIONS = ("1.37.0", "1.33.0")
APP_NAMESPACE, AGENT_NAMESPACE = "fleetwatt", "fleetwatt-agent"
WORKLOAD_KINDS = {"Deployment", "DaemonSet", "StatefulSet", "Job"}
# What each render admits to the agent's port: (namespace labels, pod labels) of its Prometheus.
PROMETHEUS_PEERS: dict[str, tuple[dict[str, str], dict[str, str]]] = {
    "base": ({"kubernetes.io/metadata.name": "monitoring"}, {"app.kubernetes.io/name": "prometheus"}),
    "demo": ({"kubernetes.io/metadata.name": "monitoring"}, {"app.kubernetes.io/name": "prometheus"}),
    "production": (
        {"kubernetes.io/metadata.name": "monitoring"},
        {
            "app.kubernetes.io/name": "prometheus",
            "operator.prometheus.io/name": "kube-prometheus-stack-prometheus",
        },
    ),
}
# The one container that may run as root, and the only capabilities it may add (daemonset.yaml says why).
ROOT_CONTAINER = ("DaemonSet", AGENT_NAMESPACE, "fleetwatt-agent", "agent")
ROOT_CAPABILITIES = {"SYS_PTRACE", "DAC_READ_SEARCH"}
SECRET_NAME = re.compile(r"SECRET|PASSWORD|TOKEN|_URL$|CREDENTIAL|PRIVATE", re.IGNORECASE)
# Setting names ending in _URL that hold no credentials.
PLAIN_URLS = {"FLEETWATT_PROMETHEUS_URL", "FLEETWATT_BASE_URL"}

Obj = dict[str, Any]


# -- rendering ------------------------------------------------------------------------------------------------


def _kubectl() -> str:
    path = shutil.which("kubectl")
    if path:
        return path
    reason = "kubectl is missing: install Debian's kubernetes-client (scripts/bootstrap.sh does)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(reason)
    pytest.skip(reason)


@functools.cache
def _render(kubectl: str, directory: Path) -> tuple[Obj, ...]:
    proc = subprocess.run([kubectl, "kustomize", str(directory)], capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise AssertionError(f"kubectl kustomize {directory} failed:\n{proc.stderr}")
    return tuple(doc for doc in yaml.safe_load_all(proc.stdout) if doc)


def render(name: str) -> list[Obj]:
    """An overlay's objects ("base": the base alone; "base/agent": the agent alone)."""
    directory = K8S / name if name.startswith("base") else K8S / "overlays" / name
    return list(_render(_kubectl(), directory))


def find(objs: list[Obj], kind: str, name: str, namespace: str | None = None) -> Obj:
    found = [
        o
        for o in objs
        if o["kind"] == kind
        and o["metadata"]["name"] == name
        and (namespace is None or o["metadata"].get("namespace") == namespace)
    ]
    assert len(found) == 1, f"{kind}/{name}: {len(found)} found"
    return found[0]


def containers(pod_spec: Obj) -> Iterator[tuple[Obj, bool]]:
    """(container, is an init container) for each container of a pod."""
    for c in pod_spec.get("initContainers", []):
        yield c, True
    for c in pod_spec["containers"]:
        yield c, False


def workloads(objs: list[Obj]) -> Iterator[tuple[Obj, Obj]]:
    """(object, pod template spec) of each object that makes pods."""
    for o in objs:
        if o["kind"] in WORKLOAD_KINDS:
            yield o, o["spec"]["template"]["spec"]
        elif o["kind"] == "CronJob":
            yield o, o["spec"]["jobTemplate"]["spec"]["template"]["spec"]


ALL_RENDERS = ("base", *OVERLAYS)


@pytest.fixture(params=ALL_RENDERS)
def objs(request: pytest.FixtureRequest) -> tuple[str, list[Obj]]:
    return request.param, render(request.param)


# -- every object is valid ------------------------------------------------------------------------------------


def test_every_object_is_valid_kubernetes_or_a_sound_prometheus_operator_object(
    objs: tuple[str, list[Obj]],
) -> None:
    import kubernetes_validate

    name, rendered = objs
    kinds = {o["kind"] for o in rendered}
    assert {"Deployment", "DaemonSet", "Job", "Service", "ConfigMap", "NetworkPolicy"} <= kinds, kinds
    assert {"ServiceMonitor", "PrometheusRule"} <= kinds, kinds
    for o in rendered:
        where = f"{name}: {o['kind']}/{o['metadata']['name']}"
        if o["kind"] == "Namespace":
            assert o["metadata"]["name"] in (APP_NAMESPACE, AGENT_NAMESPACE), where
        else:  # nothing lands in whatever namespace kubectl happens to point at
            assert o["metadata"].get("namespace") in (APP_NAMESPACE, AGENT_NAMESPACE), where
        if o["apiVersion"].startswith("monitoring.coreos.com/"):
            check_prometheus_operator_object(o, rendered)
            continue
        for version in K8S_VERSIONS:
            try:
                kubernetes_validate.validate(o, version, strict=True)
            except kubernetes_validate.ValidationError as exc:
                path = ".".join(str(p) for p in exc.path)
                raise AssertionError(f"{where} is not valid in Kubernetes {version} at {path}: {exc.message}") from None


DURATION = re.compile(r"^(\d+(ms|s|m|h|d|w|y))+$")


def check_prometheus_operator_object(o: Obj, rendered: list[Obj]) -> None:
    """What kubernetes-validate cannot: the CRD's schema (the fields used here), and that what a
    ServiceMonitor names exists in the render (its Service, port, job label, the Secret the pods read)."""
    where = f"{o['kind']}/{o['metadata']['name']}"
    assert o["apiVersion"] == "monitoring.coreos.com/v1", where
    assert set(o) == {"apiVersion", "kind", "metadata", "spec"}, where
    assert set(o["metadata"]) <= {"name", "namespace", "labels", "annotations"}, where
    spec = o["spec"]
    if o["kind"] == "ServiceMonitor":
        assert set(spec) <= {"jobLabel", "selector", "endpoints", "namespaceSelector"}, (where, set(spec))
        selector = spec["selector"]["matchLabels"]
        services = [
            s
            for s in rendered
            if s["kind"] == "Service"
            and s["metadata"]["namespace"] == o["metadata"]["namespace"]
            and selector.items() <= s["metadata"].get("labels", {}).items()
        ]
        assert len(services) == 1, f"{where} selects {len(services)} Services"
        [service] = services
        assert spec["jobLabel"] in service["metadata"]["labels"], where
        assert spec["endpoints"], where
        for endpoint in spec["endpoints"]:
            assert set(endpoint) <= {"port", "path", "interval", "scrapeTimeout", "authorization"}, (where, endpoint)
            assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}, where
            assert endpoint["path"].startswith("/"), where
            assert DURATION.match(endpoint["interval"]) and DURATION.match(endpoint["scrapeTimeout"]), where
            auth = endpoint["authorization"]
            assert auth["type"] == "Bearer" and set(auth["credentials"]) == {"name", "key"}, where
            # the same Secret the scraped pods read their token from
            assert auth["credentials"]["name"] in secrets_referenced(rendered, o["metadata"]["namespace"]), where
    elif o["kind"] == "PrometheusRule":
        assert set(spec) == {"groups"}, where
        check_rule_groups(spec["groups"], where)
    else:
        raise AssertionError(f"{where}: no check for this kind")


def check_rule_groups(groups: list[Obj], where: str) -> None:
    names = [g["name"] for g in groups]
    assert names and len(names) == len(set(names)), (where, names)
    for group in groups:
        assert set(group) <= {"name", "interval", "rules", "limit", "query_offset"}, (where, group["name"])
        assert group["rules"], (where, group["name"])
        for rule in group["rules"]:
            assert ("record" in rule) != ("alert" in rule), (where, rule)
            allowed = {"record", "expr", "labels"} if "record" in rule else {"alert", "expr", "for", "labels"}
            assert set(rule) <= allowed | {"annotations", "keep_firing_for"}, (where, rule)
            assert isinstance(rule["expr"], str | int | float) and str(rule["expr"]).strip(), (where, rule)
            for key in ("for", "keep_firing_for"):
                assert key not in rule or DURATION.match(rule[key]), (where, rule)
            for key in ("labels", "annotations"):
                assert all(isinstance(k, str) and isinstance(v, str) for k, v in rule.get(key, {}).items()), rule


def secrets_referenced(rendered: list[Obj], namespace: str) -> set[str]:
    names: set[str] = set()
    for o, spec in workloads(rendered):
        if o["metadata"]["namespace"] != namespace:
            continue
        names |= {v["secret"]["secretName"] for v in spec.get("volumes", []) if "secret" in v}
        for c, _ in containers(spec):
            names |= {e["secretRef"]["name"] for e in c.get("envFrom", []) if "secretRef" in e}
            names |= {
                e["valueFrom"]["secretKeyRef"]["name"]
                for e in c.get("env", [])
                if "secretKeyRef" in e.get("valueFrom", {})
            }
    return names


# -- what the manifests promise --------------------------------------------------------------------------------


def image_user() -> int:
    """The numeric uid the app's image runs as (its Dockerfile's last USER)."""
    users = [line.split()[1] for line in (ROOT / "Dockerfile").read_text().splitlines() if line.startswith("USER ")]
    assert users, "the Dockerfile sets no USER: the image would run as root"
    uid = users[-1].split(":")[0]
    assert uid.isdigit() and int(uid) != 0, f"USER {users[-1]}: numeric and not root, so runAsNonRoot can check it"
    return int(uid)


def test_every_pod_runs_confined(objs: tuple[str, list[Obj]]) -> None:
    name, rendered = objs
    uid = image_user()
    checked = 0
    for o, spec in workloads(rendered):
        pod_sc = spec.get("securityContext", {})
        assert not spec.get("hostNetwork") and not spec.get("hostIPC"), o["metadata"]["name"]
        assert spec.get("automountServiceAccountToken") is False, o["metadata"]["name"]
        for c, is_init in containers(spec):
            key = (o["kind"], o["metadata"]["namespace"], o["metadata"]["name"], c["name"])
            where = f"{name}: {'/'.join(key)}"
            sc = c.get("securityContext", {})
            seccomp = sc.get("seccompProfile", pod_sc.get("seccompProfile", {}))
            assert seccomp.get("type") == "RuntimeDefault", where
            assert sc.get("allowPrivilegeEscalation") is False, where
            assert sc.get("readOnlyRootFilesystem") is True, where
            assert not sc.get("privileged"), where
            assert sc.get("capabilities", {}).get("drop") == ["ALL"], where
            added = set(sc.get("capabilities", {}).get("add", []))
            if key == ROOT_CONTAINER:
                assert added <= ROOT_CAPABILITIES and sc.get("runAsUser") == 0 and sc.get("runAsNonRoot") is False
            else:
                assert not added, where
                assert sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot")) is True, where
                assert sc.get("runAsUser", pod_sc.get("runAsUser")) == uid, f"{where}: the image's user is {uid}"
                # a read-only root: the one place Python, gunicorn and Celery write is /tmp, an emptyDir
                tmp = next((m for m in c.get("volumeMounts", []) if m["mountPath"] == "/tmp"), None)
                assert tmp, f"{where}: no /tmp"
                assert "emptyDir" in next(v for v in spec["volumes"] if v["name"] == tmp["name"]), where
            resources = c.get("resources", {})
            for kind in ("requests", "limits"):
                assert {"cpu", "memory"} <= set(resources.get(kind, {})), f"{where}: {kind}"
            # Jobs run to their end and init containers cannot have probes; everything else is watched.
            if o["kind"] != "Job" and not is_init:
                assert "livenessProbe" in c and "readinessProbe" in c, where
            checked += 1
    assert checked >= 8, checked


def test_no_secret_value_in_the_render(objs: tuple[str, list[Obj]]) -> None:
    name, rendered = objs
    for o in rendered:
        assert not (o["kind"] == "Secret" and (o.get("data") or o.get("stringData"))), f"{name}: {o['metadata']}"
    for o in rendered:
        if o["kind"] == "ConfigMap":
            leaked = {k for k in o["data"] if SECRET_NAME.search(k) and k not in PLAIN_URLS}
            assert not leaked, f"{name}: secrets belong in a Secret, not in {o['metadata']['name']}: {leaked}"
    for _o, spec in workloads(rendered):
        for c, _ in containers(spec):
            for e in c.get("env", []):
                if SECRET_NAME.search(e["name"]) and e["name"] not in PLAIN_URLS:
                    assert "secretKeyRef" in e.get("valueFrom", {}), f"{name}: {c['name']} sets {e['name']} in clear"


def test_the_settings_are_names_fleetwatt_reads() -> None:
    known = {
        line.lstrip("# ").split("=", 1)[0]
        for line in (ROOT / ".env.example").read_text().splitlines()
        if re.match(r"^#? ?[A-Z][A-Z0-9_]*=", line)
    }
    for name in ALL_RENDERS:
        rendered = render(name)
        [config] = [o for o in rendered if o["kind"] == "ConfigMap"]
        unknown = set(config["data"]) - known
        assert not unknown, f"{name}: not in .env.example: {unknown}"
        # gunicorn and Celery start one process per CPU of the node unless told: one per CPU of the pod's limit
        limits = {
            o["metadata"]["name"]: _cpu(o["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"])
            for o in rendered
            if o["kind"] == "Deployment"
        }
        assert int(config["data"]["WEB_CONCURRENCY"]) <= limits["fleetwatt-web"], name
        assert int(config["data"]["CELERY_WORKER_CONCURRENCY"]) <= limits["fleetwatt-worker"], name


def _cpu(value: str | int) -> float:
    text = str(value)
    return int(text[:-1]) / 1000 if text.endswith("m") else float(text)


def test_beat_is_one_pod_replaced_by_recreate(objs: tuple[str, list[Obj]]) -> None:
    name, rendered = objs
    beat = find(rendered, "Deployment", "fleetwatt-beat", APP_NAMESPACE)
    assert beat["spec"]["replicas"] == 1, name
    assert beat["spec"]["strategy"] == {"type": "Recreate"}, name
    [container] = beat["spec"]["template"]["spec"]["containers"]
    assert container["command"][:4] == ["celery", "-A", "fleetwatt", "beat"], container["command"]
    # no other object runs a beat
    beats = [c for _, spec in workloads(rendered) for c, _ in containers(spec) if "beat" in c.get("command", [])[:4]]
    assert len(beats) == 1, name


def test_the_web_pods_answer_their_probes_and_prometheus(objs: tuple[str, list[Obj]]) -> None:
    name, rendered = objs
    web = find(rendered, "Deployment", "fleetwatt-web", APP_NAMESPACE)
    [container] = web["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e for e in container["env"]}
    # the kubelet and Prometheus send the pod's IP as Host: it must be allowed (after the public names)
    assert env["POD_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    assert env["DJANGO_ALLOWED_HOSTS"]["value"] == "$(DJANGO_ALLOWED_HOSTS),$(POD_IP)"
    names = [e["name"] for e in container["env"]]
    assert names.index("POD_IP") < names.index("DJANGO_ALLOWED_HOSTS")
    [config] = [o for o in rendered if o["kind"] == "ConfigMap"]
    # a redirect of Django's own to https would turn the probes' and the scrapes' plain HTTP away
    assert config["data"]["DJANGO_SECURE_SSL_REDIRECT"] == "0" and config["data"]["DJANGO_SECURE_COOKIES"] == "1"
    assert container["readinessProbe"]["httpGet"]["path"] == "/accounts/login/"
    # /metrics is scraped with the token the web pods compare against
    monitor = find(rendered, "ServiceMonitor", "fleetwatt", APP_NAMESPACE)
    credentials = monitor["spec"]["endpoints"][0]["authorization"]["credentials"]
    assert env["FLEETWATT_METRICS_TOKEN"]["valueFrom"]["secretKeyRef"] == {
        "name": credentials["name"],
        "key": credentials["key"],
    }
    # new pods wait for the migration Job, which alone reads the owner's credentials
    for deployment in ("fleetwatt-web", "fleetwatt-worker", "fleetwatt-beat"):
        spec = find(rendered, "Deployment", deployment, APP_NAMESPACE)["spec"]["template"]["spec"]
        assert any("migrate --check" in " ".join(c["command"]) for c in spec.get("initContainers", [])), deployment
    owners = [
        o["metadata"]["name"]
        for o, spec in workloads(rendered)
        for c, _ in containers(spec)
        if "fleetwatt-db-owner" in str(c.get("env", []))
    ]
    assert owners == ["fleetwatt-migrate"], owners


def test_the_agent_runs_on_gpu_nodes_only(objs: tuple[str, list[Obj]]) -> None:
    name, rendered = objs
    ds = find(rendered, "DaemonSet", "fleetwatt-agent", AGENT_NAMESPACE)
    spec = ds["spec"]["template"]["spec"]
    assert spec["nodeSelector"] == {"nvidia.com/gpu.present": "true"}, name
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in spec["tolerations"]
    # tolerating the GPU taint must not let it onto other tainted nodes
    assert all(t.get("key") for t in spec["tolerations"]), spec["tolerations"]
    assert spec["runtimeClassName"] == "nvidia" and spec["hostPID"] is True
    [container] = spec["containers"]
    # NVML from the host's driver, without taking a GPU from the jobs
    assert not any("nvidia.com/gpu" in str(container["resources"].get(k, {})) for k in ("requests", "limits"))
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["NVIDIA_VISIBLE_DEVICES"] == "all" and env["NVIDIA_DRIVER_CAPABILITIES"] == "utility"
    # the kubelet's pod-resources, read-only, where the agent looks for its socket
    mount = next(m for m in container["volumeMounts"] if m["name"] == "pod-resources")
    assert mount["readOnly"] is True
    assert env["FLEETWATT_AGENT_POD_RESOURCES_SOCKET"].startswith(mount["mountPath"] + "/")
    # the power model's state on the node, writable (the root filesystem is read-only), kept across restarts
    state = next(m for m in container["volumeMounts"] if m["name"] == "state")
    assert not state.get("readOnly") and env["FLEETWATT_AGENT_POWER_MODEL_FILE"].startswith(state["mountPath"] + "/")
    [volume] = [v for v in spec["volumes"] if v["name"] == "state"]
    assert volume["hostPath"] == {"path": state["mountPath"], "type": "DirectoryOrCreate"}
    # the folder where jobs that opt in to exact GPU time write their counters: the node's, read by the agent
    gpu_time = next(m for m in container["volumeMounts"] if m["name"] == "gpu-time")
    assert env["FLEETWATT_AGENT_GPU_TIME_DIR"] == gpu_time["mountPath"] == "/run/fleetwatt/gputime"
    [volume] = [v for v in spec["volumes"] if v["name"] == "gpu-time"]
    assert volume["hostPath"] == {"path": gpu_time["mountPath"], "type": "DirectoryOrCreate"}
    assert ds["spec"]["updateStrategy"]["type"] == "RollingUpdate"
    assert ds["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"]


def test_only_prometheus_reaches_the_agent(objs: tuple[str, list[Obj]]) -> None:
    name, rendered = objs
    ds = find(rendered, "DaemonSet", "fleetwatt-agent", AGENT_NAMESPACE)
    pod_labels = ds["spec"]["template"]["metadata"]["labels"]
    port = ds["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"]
    policies = [
        o
        for o in rendered
        if o["kind"] == "NetworkPolicy"
        and o["metadata"]["namespace"] == AGENT_NAMESPACE
        and o["spec"]["podSelector"].get("matchLabels", {}).items() <= pod_labels.items()
    ]
    assert policies, f"{name}: no NetworkPolicy selects the agent"
    namespace_labels, peer_labels = PROMETHEUS_PEERS[name]
    for policy in policies:
        assert "Ingress" in policy["spec"]["policyTypes"]
        for rule in policy["spec"].get("ingress", []):
            assert rule["ports"] == [{"protocol": "TCP", "port": port}], rule
            # each peer is Prometheus's namespace AND its pods (one element: not either)
            assert rule["from"] == [
                {"namespaceSelector": {"matchLabels": namespace_labels}, "podSelector": {"matchLabels": peer_labels}}
            ], f"{name}: {rule['from']}"
    assert any(p["spec"].get("ingress") for p in policies), f"{name}: nobody may scrape the agent"
    # and the ServiceMonitor scrapes that port
    monitor = find(rendered, "ServiceMonitor", "fleetwatt-agent", AGENT_NAMESPACE)
    service = find(rendered, "Service", "fleetwatt-agent", AGENT_NAMESPACE)
    [service_port] = [p for p in service["spec"]["ports"] if p["name"] == monitor["spec"]["endpoints"][0]["port"]]
    assert service_port["port"] == port
    # the app's pods take connections only where a policy admits them
    deny = find(rendered, "NetworkPolicy", "fleetwatt-default-deny-ingress", APP_NAMESPACE)
    assert deny["spec"]["podSelector"] == {} and deny["spec"]["policyTypes"] == ["Ingress"]
    assert not deny["spec"].get("ingress")


def test_the_prometheus_rule_is_rules_yml() -> None:
    rules = yaml.safe_load(RULES.read_text())
    committed = yaml.safe_load(PROMETHEUS_RULE.read_text())
    assert committed == prometheus_rule(rules), (
        "deploy/k8s/base/app/prometheusrule.yaml is not deploy/prometheus/rules.yml: run "
        ".venv/bin/python tests/deploy/test_k8s_manifests.py --write-prometheusrule"
    )
    check_rule_groups(rules["groups"], str(RULES))
    # and what is applied is what is committed
    for name in ALL_RENDERS:
        rule = find(render(name), "PrometheusRule", "fleetwatt", APP_NAMESPACE)
        assert rule["spec"] == {"groups": rules["groups"]}, name


def test_the_agents_own_manifest_is_the_base_rendered() -> None:
    committed = [d for d in yaml.safe_load_all(AGENT_DAEMONSET.read_text()) if d]
    assert committed == render("base/agent"), (
        "agent/deploy/daemonset.yaml is not deploy/k8s/base/agent rendered: run "
        ".venv/bin/python tests/deploy/test_k8s_manifests.py --write-agent-daemonset"
    )


# -- the generated files ---------------------------------------------------------------------------------------


def prometheus_rule(rules: Obj) -> Obj:
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {"name": "fleetwatt", "labels": {"app.kubernetes.io/part-of": "fleetwatt"}},
        "spec": {"groups": rules["groups"]},
    }


class _BlockDumper(yaml.SafeDumper):
    """Multi-line strings (PromQL, descriptions) as literal blocks, as rules.yml writes them."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)


_BlockDumper.add_representer(str, _str)


def dump(objs: list[Obj]) -> str:
    return yaml.dump_all(objs, Dumper=_BlockDumper, sort_keys=False, width=120)


def write_prometheus_rule() -> None:
    text = dump([prometheus_rule(yaml.safe_load(RULES.read_text()))])
    header = (
        "# Generated from deploy/prometheus/rules.yml by\n"
        "#   .venv/bin/python tests/deploy/test_k8s_manifests.py --write-prometheusrule\n"
        "# Edit rules.yml, not this file; tests/deploy/test_k8s_manifests.py fails while they differ.\n"
    )
    PROMETHEUS_RULE.write_text(header + text)


def write_agent_daemonset() -> None:
    kubectl = shutil.which("kubectl")
    if not kubectl:
        raise SystemExit("kubectl is missing: install Debian's kubernetes-client (scripts/bootstrap.sh does)")
    objs = _render(kubectl, K8S / "base" / "agent")
    header = (
        "# fleetwatt-agent alone on a Kubernetes cluster's GPU nodes: deploy/k8s/base/agent rendered, where each\n"
        "# object's comments say what it needs and why (docs/agent.md, docs/deploy.md). Generated by\n"
        "#   .venv/bin/python tests/deploy/test_k8s_manifests.py --write-agent-daemonset\n"
        "# Edit deploy/k8s/base/agent, not this file. Create the token first:\n"
        "#   kubectl create namespace fleetwatt-agent\n"
        "#   kubectl -n fleetwatt-agent create secret generic fleetwatt-agent-token "
        '--from-literal=token="$(openssl rand -hex 32)"\n'
        "#   kubectl apply -f agent/deploy/daemonset.yaml\n"
        "# Without prometheus-operator, leave out its ServiceMonitor and scrape the pods as docs/agent.md shows.\n"
    )
    AGENT_DAEMONSET.write_text(header + dump(list(objs)))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--write-prometheusrule", action="store_true", help=f"write {PROMETHEUS_RULE.relative_to(ROOT)}"
    )
    parser.add_argument(
        "--write-agent-daemonset", action="store_true", help=f"write {AGENT_DAEMONSET.relative_to(ROOT)}"
    )
    args = parser.parse_args()
    if not (args.write_prometheusrule or args.write_agent_daemonset):
        parser.error("nothing to write")
    if args.write_prometheusrule:
        write_prometheus_rule()
    if args.write_agent_daemonset:
        write_agent_daemonset()
    sys.exit(0)
