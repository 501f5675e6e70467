"""deploy/k8s run for real: the demo overlay rendered by `kubectl kustomize` under an overlay of the test's
own, and its pods played by podman 4.3 (`podman kube play`) on this machine as a one-node cluster, with
what podman lacks of a kubelet done by tests/deploy/kube_play.py (the Job's and the DaemonSet's pods made
from their templates, the pods' environment, Secret volumes, the probes). Once for the module: the migrate
Job's pod, then web, worker and beat; the agent's DaemonSet pod replays a recorded H200 trace instead of
reading NVML.

The test's overlay is what a site's overlay sets: the images (built here from the Dockerfiles), the Secrets
(a database and two roles of the module's own on this machine's Postgres, a Redis of its own, tokens),
the app's role and web's address in the ConfigMap, the ports (the pods share the host's network: each
port declared is moved to a free one), and the agent's backend (`--backend replay`, the trace on the node).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import psycopg
import pytest
import requests
import yaml

from apps.simulator.local_prometheus import free_port
from tests.deploy.containers import REPO, BuiltImage, podman
from tests.deploy.kube_play import NODE_IP, Obj, PlayedContainer, PlayedPod, played_pods
from tests.deploy.stack_services import StackDatabase, database_with_roles, redis_server

OVERLAY = REPO / "deploy" / "k8s" / "overlays" / "demo"
NODE_NAME = "fleetwatt-kube-play-node"
TRACE = REPO / "tests" / "agent" / "fixtures" / "h200_two_jobs_trace.jsonl"
TRACE_GPU_UUID = "GPU-02d86d97-f47b-94f8-c960-405eadf4e22f"  # the trace's one GPU
REPLAY_DIR = "/var/lib/fleetwatt-agent-replay"  # on the node (a hostPath), and in the agent's container
# The kubelet's probes say who they are; the 200-399 range is success.
PROBE_HEADERS = {"User-Agent": "kube-probe/1.33", "Accept": "*/*"}
# Linux capability bits (include/uapi/linux/capability.h).
CAPABILITY_BITS = {"DAC_READ_SEARCH": 2, "SYS_PTRACE": 19}


@dataclass(frozen=True)
class KubeStack:
    pods: list[PlayedPod]
    name_suffix: str  # the test's overlay's, on every object's name
    database: StackDatabase
    redis_url: str
    web_port: int
    agent_port: int
    metrics_token: str
    agent_token: str
    migrate_exit_code: str
    timings_s: dict[str, float]  # for docs/benchmarks.md

    def pod(self, kind: str, name: str) -> PlayedPod:
        (found,) = (p for p in self.pods if p.source == f"{kind}/{name}{self.name_suffix}")
        return found

    def running(self) -> list[tuple[PlayedPod, PlayedContainer]]:
        return [(p, c) for p in self.pods for c in p.containers if not c.init and p.source.split("/")[0] != "Job"]


def kubectl() -> str:
    path = shutil.which("kubectl")
    assert path, "kubectl is missing: install Debian's kubernetes-client (scripts/bootstrap.sh does)"
    return path


def overlay_write(
    folder: Path,
    *,
    name_suffix: str,
    app_image: BuiltImage,
    agent_image: BuiltImage,
    database: StackDatabase,
    redis_url: str,
    web_port: int,
    agent_port: int,
    metrics_token: str,
    agent_token: str,
) -> Path:
    """An overlay over deploy/k8s/overlays/demo, as a site writes one (the fields Debian's kubectl 1.20 reads)."""
    folder.mkdir()

    def image(built: BuiltImage) -> dict[str, str]:
        name, tag = built.tag.rsplit(":", 1)
        return {"newName": name, "newTag": tag}

    def json_patch(kind: str, name: str, namespace: str, ops: list[Obj]) -> Obj:
        path = f"{kind.lower()}-{name}.yaml"
        (folder / path).write_text(yaml.safe_dump(ops, sort_keys=False))
        return {
            "target": {"group": "apps", "version": "v1", "kind": kind, "name": name, "namespace": namespace},
            "path": path,
        }

    container = "/spec/template/spec/containers/0"
    volumes = "/spec/template/spec/volumes"
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "bases": [os.path.relpath(OVERLAY, folder)],
        # the pods of several runs never share a name in podman's store
        "nameSuffix": name_suffix,
        "images": [
            {"name": "ghcr.io/fleetwatt/fleetwatt", **image(app_image)},
            {"name": "ghcr.io/fleetwatt/fleetwatt-agent", **image(agent_image)},
        ],
        # the Secrets docs/deploy.md has the operator create
        "secretGenerator": [
            {
                "name": "fleetwatt",
                "namespace": "fleetwatt",
                "literals": [
                    f"DJANGO_SECRET_KEY={secrets.token_urlsafe(50)}",
                    f"DATABASE_URL={database.url(database.app)}",
                    f"REDIS_URL={redis_url}",
                ],
            },
            {
                "name": "fleetwatt-db-owner",
                "namespace": "fleetwatt",
                "literals": [f"DATABASE_OWNER_URL={database.url(database.owner)}"],
            },
            {"name": "fleetwatt-metrics-token", "namespace": "fleetwatt", "literals": [f"token={metrics_token}"]},
            {"name": "fleetwatt-agent-token", "namespace": "fleetwatt-agent", "literals": [f"token={agent_token}"]},
        ],
        "configMapGenerator": [
            {
                "name": "fleetwatt-config",
                "namespace": "fleetwatt",
                "behavior": "merge",
                "literals": [f"FLEETWATT_DB_APP_ROLE={database.app}", f"GUNICORN_BIND={NODE_IP}:{web_port}"],
            }
        ],
        # each `test` fails the render when the manifest no longer says what the patch expects
        "patchesJson6902": [
            json_patch(
                "Deployment",
                "fleetwatt-web",
                "fleetwatt",
                [
                    {"op": "test", "path": f"{container}/ports/0", "value": {"name": "http", "containerPort": 8000}},
                    {"op": "replace", "path": f"{container}/ports/0/containerPort", "value": web_port},
                ],
            ),
            json_patch(
                "DaemonSet",
                "fleetwatt-agent",
                "fleetwatt-agent",
                [
                    {"op": "test", "path": f"{container}/ports/0", "value": {"name": "metrics", "containerPort": 9877}},
                    {"op": "replace", "path": f"{container}/ports/0/containerPort", "value": agent_port},
                    {"op": "test", "path": f"{container}/args/0", "value": "--backend"},
                    {"op": "test", "path": f"{container}/args/1", "value": "nvml"},
                    {"op": "replace", "path": f"{container}/args/1", "value": "replay"},
                    {"op": "test", "path": f"{container}/args/3", "value": "$(POD_IP):9877"},
                    {"op": "replace", "path": f"{container}/args/3", "value": f"$(POD_IP):{agent_port}"},
                    {"op": "add", "path": f"{container}/args/-", "value": "--replay"},
                    {"op": "add", "path": f"{container}/args/-", "value": f"{REPLAY_DIR}/{TRACE.name}"},
                    {
                        "op": "add",
                        "path": f"{container}/volumeMounts/-",
                        "value": {"name": "replay", "mountPath": REPLAY_DIR, "readOnly": True},
                    },
                    {
                        "op": "add",
                        "path": f"{volumes}/-",
                        "value": {"name": "replay", "hostPath": {"path": REPLAY_DIR, "type": "Directory"}},
                    },
                ],
            ),
        ],
    }
    (folder / "kustomization.yaml").write_text(yaml.safe_dump(kustomization, sort_keys=False))
    return folder


def render(overlay: Path) -> list[Obj]:
    proc = subprocess.run([kubectl(), "kustomize", str(overlay)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"kubectl kustomize {overlay} failed:\n{proc.stderr}"
    return [doc for doc in yaml.safe_load_all(proc.stdout) if doc]


def kube_play(pods: list[PlayedPod], path: Path) -> None:
    path.write_text(yaml.safe_dump_all([pod.document for pod in pods], sort_keys=False))
    podman("kube", "play", str(path), timeout_s=300)


def logs(container: str) -> str:
    proc = podman("logs", container, check=False)
    return (proc.stdout + proc.stderr)[-3000:]


def inspect(container: str) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(podman("inspect", container).stdout)[0]
    return result


def http_probe(probe: Obj, ports: dict[str, int]) -> requests.Response:
    """An httpGet probe as the kubelet sends it: to the pod's IP, from the node."""
    get = probe["httpGet"]
    port = ports[get["port"]] if isinstance(get["port"], str) else get["port"]
    return requests.get(
        f"http://{NODE_IP}:{port}{get['path']}",
        headers=PROBE_HEADERS,
        timeout=probe.get("timeoutSeconds", 1),
        allow_redirects=False,
    )


def tcp_probe(probe: Obj, ports: dict[str, int]) -> None:
    port = probe["tcpSocket"]["port"]
    port = ports[port] if isinstance(port, str) else port
    with socket.create_connection((NODE_IP, port), timeout=probe.get("timeoutSeconds", 1)):
        pass


def exec_probe(probe: Obj, container: str) -> subprocess.CompletedProcess[str]:
    """An exec probe as the kubelet runs it: the command in the container."""
    timeout_s = probe.get("timeoutSeconds", 1) + 30  # and podman's own start
    return podman("exec", container, *probe["exec"]["command"], timeout_s=timeout_s, check=False)


def wait_ready(pod: PlayedPod, container: PlayedContainer, timeout_s: float) -> None:
    """Until the container's readiness probe passes, as the kubelet marks a pod ready."""
    probe = container.probes["readinessProbe"]
    deadline = time.monotonic() + timeout_s
    while True:
        state = inspect(container.podman_name)["State"]
        assert state["Running"], f"{pod.source}: {container.name} {state['Status']}:\n{logs(container.podman_name)}"
        try:
            if "httpGet" in probe:
                ok = 200 <= http_probe(probe, container.ports).status_code < 400
            else:
                ok = exec_probe(probe, container.podman_name).returncode == 0
        except (requests.ConnectionError, requests.Timeout):  # a probe that times out failed: try again
            ok = False
        if ok:
            return
        assert time.monotonic() < deadline, f"{pod.source}: {container.name} not ready:\n{logs(container.podman_name)}"
        time.sleep(0.5)


def at_once(calls: list[Callable[[], object]]) -> None:
    """Each call in a thread of its own, all awaited; the first to fail raises."""
    with ThreadPoolExecutor() as pool:
        for future in [pool.submit(call) for call in calls]:
            future.result()


def pod_remove(pod: PlayedPod) -> None:
    podman("pod", "rm", "--force", "--ignore", "--time", "10", pod.podman_name, check=False)
    # its emptyDirs went with it, unless its play failed half-way
    if pod.volumes:
        podman("volume", "rm", "--force", *pod.volumes, check=False)


@pytest.fixture(scope="module")
def kube_stack(
    app_image: BuiltImage, agent_image: BuiltImage, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[KubeStack]:
    folder = tmp_path_factory.mktemp("kube")
    with database_with_roles("kube") as database, redis_server(folder / "redis") as redis_url:
        name_suffix = f"-k{uuid.uuid4().hex[:8]}"
        web_port, agent_port = free_port(), free_port()
        metrics_token, agent_token = secrets.token_hex(32), secrets.token_hex(32)
        overlay = overlay_write(
            folder / "overlay",
            name_suffix=name_suffix,
            app_image=app_image,
            agent_image=agent_image,
            database=database,
            redis_url=redis_url,
            web_port=web_port,
            agent_port=agent_port,
            metrics_token=metrics_token,
            agent_token=agent_token,
        )
        node = folder / "node"
        pods = played_pods(render(overlay), node_root=node, node_name=NODE_NAME)
        assert sorted(p.source.removesuffix(name_suffix) for p in pods) == [
            "DaemonSet/fleetwatt-agent",
            "Deployment/fleetwatt-beat",
            "Deployment/fleetwatt-web",
            "Deployment/fleetwatt-worker",
            "Job/fleetwatt-migrate",
        ]
        shutil.copy(TRACE, node / REPLAY_DIR.lstrip("/") / TRACE.name)
        timings_s: dict[str, float] = {}
        started = time.monotonic()
        try:
            # the Job's pod and the agent's first; the Deployments' pods once the Job has ended (their init
            # containers would wait for it: kube play, which runs them before it returns, would wait too)
            first = [p for p in pods if p.source.split("/")[0] in ("Job", "DaemonSet")]
            kube_play(first, folder / "job-and-daemonset.yaml")
            (migrate,) = (p.containers[0].podman_name for p in first if p.source.startswith("Job/"))
            exit_code = podman("wait", migrate, timeout_s=300).stdout.strip()
            assert exit_code == "0", f"the migrate Job's pod exited {exit_code}:\n{logs(migrate)}"
            timings_s["the Job's and the agent's pods played, the Job ended"] = time.monotonic() - started
            # a play makes its pods one after the other: three plays at once
            at_once([partial(kube_play, [p], folder / f"{p.podman_name}.yaml") for p in pods if p not in first])
            timings_s["web, worker and beat played (their init containers run)"] = time.monotonic() - started
            stack = KubeStack(
                pods=pods,
                name_suffix=name_suffix,
                database=database,
                redis_url=redis_url,
                web_port=web_port,
                agent_port=agent_port,
                metrics_token=metrics_token,
                agent_token=agent_token,
                migrate_exit_code=exit_code,
                timings_s=timings_s,
            )
            at_once([partial(wait_ready, pod, container, 90) for pod, container in stack.running()])
            timings_s["every pod ready"] = time.monotonic() - started
            yield stack
        finally:
            at_once([partial(pod_remove, p) for p in pods])


def test_the_migrate_jobs_pod_migrates_as_the_owner_and_the_app_runs_as_its_role(
    kube_stack: KubeStack, capsys: pytest.CaptureFixture[str]
) -> None:
    # given the stack up: the Job's pod ended, web, worker and beat ready
    with capsys.disabled():
        timings = ", ".join(f"{what} {seconds:.0f} s" for what, seconds in kube_stack.timings_s.items())
        print(f"\nkube play: {timings}")  # noqa: T201  # for docs/benchmarks.md
    # then the Job's pod exited 0, and the owner owns every table, the app's role none
    assert kube_stack.migrate_exit_code == "0"
    database = kube_stack.database
    with psycopg.connect(database.admin_dsn) as conn:
        owners = dict(conn.execute("SELECT tableowner, count(*) FROM pg_tables WHERE schemaname = 'public' GROUP BY 1"))
        assert set(owners) == {database.owner}, owners
        rights = conn.execute(
            "SELECT has_table_privilege(%(app)s, 'waste_auditentry', 'INSERT'),"
            " has_table_privilege(%(app)s, 'waste_auditentry', 'UPDATE')",
            {"app": database.app},
        ).fetchone()
        assert rights == (True, False)
        # and web, asked for /healthz, reaches Postgres as the app's role; nothing connects as the owner
        assert requests.get(f"http://{NODE_IP}:{kube_stack.web_port}/healthz", timeout=10).status_code == 200
        roles = {
            row[0]
            for row in conn.execute(
                "SELECT usename FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()", (database.name,)
            )
        }
        assert roles == {database.app}, roles
    # and only the Job's pod holds the owner's URL: web, the worker and beat have the app role's alone
    for pod, container in kube_stack.running():
        if pod.source.startswith("Deployment/"):
            environment = podman("exec", container.podman_name, "env").stdout
            assert f"DATABASE_URL={database.url(database.app)}" in environment.splitlines(), pod.source
            assert "DATABASE_OWNER_URL" not in environment and database.owner not in environment, pod.source


def test_web_answers_its_probes_healthz_and_prometheus(kube_stack: KubeStack) -> None:
    web = kube_stack.pod("Deployment", "fleetwatt-web").container("web")
    # when the kubelet's probes ask web, from the node
    ready = http_probe(web.probes["readinessProbe"], web.ports)
    tcp_probe(web.probes["livenessProbe"], web.ports)
    # then the login page answers (ready), and the port accepts (alive)
    assert ready.status_code == 200, ready.text[:500]
    assert web.probes["readinessProbe"]["httpGet"]["path"] == "/accounts/login/"
    # and /healthz finds Postgres and Redis from the container
    health = requests.get(f"http://{NODE_IP}:{kube_stack.web_port}/healthz", timeout=10).json()
    assert health["checks"]["postgres"]["ok"] and health["checks"]["redis"]["ok"], health
    # and /metrics answers the ServiceMonitor's token (the Secret's, through secretKeyRef), and no one else
    metrics = f"http://{NODE_IP}:{kube_stack.web_port}/metrics"
    authorized = requests.get(metrics, headers={"Authorization": f"Bearer {kube_stack.metrics_token}"}, timeout=10)
    assert authorized.status_code == 200 and "fleetwatt_" in authorized.text
    assert requests.get(metrics, timeout=10).status_code in (401, 403)


def test_worker_and_beat_answer_their_exec_probes(kube_stack: KubeStack) -> None:
    for name in ("worker", "beat"):
        container = kube_stack.pod("Deployment", f"fleetwatt-{name}").container(name)
        # (readiness and liveness run the same command: it is run once)
        commands = {json.dumps(probe["exec"]["command"]): probe for probe in container.probes.values()}
        assert set(container.probes) == {"readinessProbe", "livenessProbe"} and len(commands) == 1, container.probes
        for probe in commands.values():
            # when the probe's command runs in the container, as the kubelet runs it
            proc = exec_probe(probe, container.podman_name)
            # then it passes: the worker answers `celery inspect ping` as celery@<pod>, beat as celerybeat@<pod>
            assert proc.returncode == 0, f"{name}: {proc.stdout}{proc.stderr}\n{logs(container.podman_name)}"


def test_the_agents_daemonset_pod_replays_a_trace_and_serves_metrics_with_its_token(kube_stack: KubeStack) -> None:
    agent = kube_stack.pod("DaemonSet", "fleetwatt-agent").container("agent")
    # when the kubelet's probes ask the agent
    for probe in ("readinessProbe", "livenessProbe"):
        health = http_probe(agent.probes[probe], agent.ports)
        # then it is sampling the replayed trace
        assert health.status_code == 200, health.text
    # and /metrics answers the token of the Secret's volume, with the trace's GPU on the node's name
    url = f"http://{NODE_IP}:{kube_stack.agent_port}/metrics"
    assert requests.get(url, timeout=10).status_code == 401
    metrics = requests.get(url, headers={"Authorization": f"Bearer {kube_stack.agent_token}"}, timeout=10)
    assert metrics.status_code == 200, metrics.text[:500]
    gpu_series = [line for line in metrics.text.splitlines() if TRACE_GPU_UUID in line and not line.startswith("#")]
    assert gpu_series, metrics.text[:2000]
    assert all(f'hostname="{NODE_NAME}"' in line for line in gpu_series), gpu_series[:3]
    assert "(backend replay, 1 GPU(s)" in logs(agent.podman_name)


def proc_status(pid: int) -> dict[str, str]:
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return dict(line.split(":\t", 1) for line in lines if ":\t" in line)


def test_every_container_runs_as_its_security_context_says(kube_stack: KubeStack) -> None:
    checked = []
    for pod in kube_stack.pods:
        for container in pod.containers:
            context = container.security_context
            where = f"{pod.source}: {container.name}"
            config = inspect(container.podman_name)
            # then podman made the container as the manifest says: read-only root, no new privileges, the
            # user (non-root where runAsNonRoot), every capability dropped but those added
            assert context["readOnlyRootFilesystem"] is True and config["HostConfig"]["ReadonlyRootfs"], where
            assert context["allowPrivilegeEscalation"] is False, where
            assert "no-new-privileges" in config["HostConfig"]["SecurityOpt"], where
            uid = int(config["Config"]["User"].split(":")[0])
            assert uid == context["runAsUser"], where
            if context.get("runAsNonRoot"):
                assert uid != 0, where
            added = set(context["capabilities"].get("add", []))
            assert context["capabilities"]["drop"] == ["ALL"], where
            assert {cap.removeprefix("CAP_") for cap in config["EffectiveCaps"] or []} == added, where
            # and nothing it ran met the read-only root
            assert "Read-only file system" not in logs(container.podman_name), where
            if container.init or pod.source.startswith("Job/"):
                # an init container, and the Job's, ran to its end: exit 0
                assert config["State"]["ExitCode"] == 0 and not config["State"]["Running"], where
                checked.append(where)
                continue
            # and the running process holds it: its uid, no_new_privs, seccomp's filter, its capabilities
            running = config["State"]["Running"] and config["RestartCount"] == 0
            assert running, f"{where}:\n{logs(container.podman_name)}"
            status = proc_status(config["State"]["Pid"])
            assert status["Uid"].split()[0] == str(uid), where
            assert status["NoNewPrivs"] == "1", where
            assert status["Seccomp"] == "2", where  # RuntimeDefault: podman's default profile
            assert int(status["CapEff"], 16) == sum(1 << CAPABILITY_BITS[cap] for cap in added), where
            # and from inside: its user, / not writable, /tmp writable only where an emptyDir is mounted there
            shell = (
                "id -u; touch /probe 2>&1; touch /tmp/probe 2>/dev/null && echo tmp writable;"
                " grep NoNewPrivs /proc/self/status"
            )
            out = podman("exec", container.podman_name, "sh", "-c", shell, check=False).stdout
            assert out.splitlines()[0] == str(uid), f"{where}: {out}"
            assert "touch: cannot touch '/probe': Read-only file system" in out, f"{where}: {out}"
            has_tmp = "/tmp" in {mount["Destination"] for mount in config["Mounts"]}
            assert ("tmp writable" in out) == has_tmp, f"{where}: {out}"
            assert "NoNewPrivs:\t1" in out, f"{where}: {out}"
            checked.append(where)
    # and every container of the render was looked at: 3 init containers, the Job's, 3 of the app, the agent's
    assert len(checked) == 8, checked
