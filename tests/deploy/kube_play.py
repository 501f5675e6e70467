"""deploy/k8s's rendered objects as Debian's podman 4.3 plays them (`podman kube play`), with the kubelet's
part that podman lacks done here, on a one-node "cluster": this machine.

podman 4.3 plays Pods and Deployments: pods, init containers, security contexts, resources, emptyDir and
hostPath volumes, the host's network, restart policies. Where it falls short of a kubelet, this module
does the kubelet's part:

- kinds: it plays no Job and no DaemonSet. The Job's pod and the DaemonSet's pod on this node are Pods made
  from their pod templates; Deployments are played as they are.
- environment: podman lets `envFrom` override `env` (Kubernetes: `env` wins), expands no `$(VAR)`, knows no
  fieldRef but metadata.*, and cannot read through secretKeyRef a Secret that its own play of a Secret
  stored. So each container's environment is made here as the kubelet makes it (envFrom's ConfigMaps and
  Secrets in order, then `env` in order, each `$(VAR)` expanded against what came before, the downward
  API's fields; then `$(VAR)` in command and args) and given to podman as plain values, with HOSTNAME,
  which containerd and CRI-O put in every container's environment (exec probes read it) and podman gives
  only to a container's first process, not to `podman exec`.
- volumes: podman makes an emptyDir a volume named as the pod names it, the same for every pod of the
  machine that uses the name (web's, the worker's and beat's `tmp` would be one /tmp): each is renamed
  after its pod. A Secret volume it mounts empty: the Secret's keys are written as files (with
  defaultMode) in a folder of the node's and bind-mounted from there (hostPath), as the kubelet does.
- probes: podman turns a liveness probe into a command run in the container (curl, nc: not in the images)
  on a systemd timer (no systemd here), and ignores readiness. The kubelet runs httpGet and tcpSocket
  probes from the node and exec probes in the container: the probes are taken out of what podman plays and
  returned, for the caller to run so.
- init containers: podman gives them the pod's restart policy (containers/podman#16343): under Always they
  would run again for ever, so a pod with init containers and restartPolicy Always is played with
  OnFailure (init containers then restart only when they fail, as under a kubelet; the caller checks that
  the app's containers run and never restarted). They are kept after they ran (podman's annotation), so
  that their user, root filesystem and exit code can be read afterwards, and because podman's removal of
  those it runs once races with their exit (containers/podman#18477).
- the node: pods on the host's network (they reach this machine's Postgres and Redis on 127.0.0.1; a pod's
  IP is the node's, 127.0.0.1; a container's ports are the node's, so podman is given none to map), every
  hostPath under a folder of the node's own rather than /. podman 4.3 ignores hostPID (the agent's replay
  needs no host process).
"""

from __future__ import annotations

import base64
import copy
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Obj = dict[str, Any]

NODE_IP = "127.0.0.1"
# Runs init containers once per pod start and keeps them afterwards (podman's default removes them).
INIT_CONTAINER_TYPE = {"io.podman.annotations.init.container.type": "always"}
PROBES = ("livenessProbe", "readinessProbe", "startupProbe")
# $(VAR) and its escape $$, as the kubelet expands them (k8s.io/kubernetes/third_party/forked/golang/expansion).
VAR_REFERENCE = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


@dataclass(frozen=True)
class PlayedContainer:
    name: str  # the manifest's
    podman_name: str
    init: bool
    security_context: Obj  # the pod's, overridden by the container's, as Kubernetes merges them
    probes: dict[str, Obj]  # e.g. {"readinessProbe": {...}}
    ports: dict[str, int]  # port name -> number


@dataclass(frozen=True)
class PlayedPod:
    source: str  # "Job/fleetwatt-migrate", ...
    podman_name: str
    document: Obj  # what kube play gets: a Pod or a Deployment
    volumes: list[str] = field(default_factory=list)  # the podman volumes it makes
    containers: list[PlayedContainer] = field(default_factory=list)

    def container(self, name: str) -> PlayedContainer:
        (found,) = (c for c in self.containers if c.name == name)
        return found


def expand(value: str, env: Mapping[str, str]) -> str:
    """`$(NAME)` replaced by NAME's value where it is defined, left as it is where not; `$$` is `$`."""

    def one(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group(1)
        return env[name] if name in env else match.group(0)

    return VAR_REFERENCE.sub(one, value)


def secret_values(secret: Obj) -> dict[str, str]:
    values = {key: base64.b64decode(value).decode() for key, value in (secret.get("data") or {}).items()}
    return values | dict(secret.get("stringData") or {})


class Kubelet:
    """The kubelet's part on this node: the render's ConfigMaps and Secrets made into the pods' environment
    and files, the node's folders, and the pod templates made into what podman plays."""

    def __init__(self, objs: Iterable[Obj], *, node_root: Path, node_name: str) -> None:
        objs = list(objs)
        self.config_maps = {o["metadata"]["name"]: dict(o.get("data") or {}) for o in objs if o["kind"] == "ConfigMap"}
        self.secrets = {o["metadata"]["name"]: secret_values(o) for o in objs if o["kind"] == "Secret"}
        self.node_root = node_root
        self.node_name = node_name

    def source(self, kind: str, name: str, optional: bool | None) -> dict[str, str] | None:
        found = (self.config_maps if kind == "configMap" else self.secrets).get(name)
        assert found is not None or optional, f"the pod needs the {kind} {name}, which the render lacks"
        return found

    def field(self, path: str, pod_name: str) -> str:
        fields = {
            "metadata.name": pod_name,
            "spec.nodeName": self.node_name,
            "status.podIP": NODE_IP,  # host network: the pod's address is the node's
            "status.hostIP": NODE_IP,
        }
        assert path in fields, f"fieldRef {path}: not known here"
        return fields[path]

    def environment(self, container: Obj, pod_name: str) -> dict[str, str]:
        """The container's environment as the kubelet makes it (kubelet_pods.go, makeEnvironmentVariables)."""
        env: dict[str, str] = {}
        for source in container.get("envFrom", []):
            kind = "configMap" if "configMapRef" in source else "secret"
            ref = source[f"{kind}Ref"]
            values = self.source(kind, ref["name"], ref.get("optional"))
            env |= {source.get("prefix", "") + k: v for k, v in (values or {}).items()}
        for var in container.get("env", []):
            value_from = var.get("valueFrom")
            if value_from is None:
                env[var["name"]] = expand(var.get("value", ""), env)
            elif "fieldRef" in value_from:
                env[var["name"]] = self.field(value_from["fieldRef"]["fieldPath"], pod_name)
            else:
                kind = "configMap" if "configMapKeyRef" in value_from else "secret"
                ref = value_from[f"{kind}KeyRef"]
                values = self.source(kind, ref["name"], ref.get("optional"))
                if values is not None and ref["key"] in values:
                    env[var["name"]] = values[ref["key"]]
                else:
                    assert ref.get("optional"), f"{var['name']}: no key {ref['key']} in the {kind} {ref['name']}"
        return env

    def secret_volume(self, pod_name: str, volume: Obj) -> Obj:
        """The Secret's keys written as files, as the kubelet writes them, mounted from the node."""
        source = volume["secret"]
        values = self.source("secret", source["secretName"], source.get("optional")) or {}
        folder = self.node_root / "kubelet" / "pods" / pod_name / "volumes" / "secret" / volume["name"]
        folder.mkdir(parents=True)
        for key, value in values.items():
            path = folder / key
            path.write_text(value)
            path.chmod(source.get("defaultMode", 0o644))
        return {"name": volume["name"], "hostPath": {"path": str(folder), "type": "Directory"}}

    def host_path(self, volume: Obj) -> Obj:
        """A hostPath under the node's folder; a `Directory` the node must hold is made, as a kubelet's node
        holds it."""
        source = volume["hostPath"]
        path = self.node_root / source["path"].lstrip("/")
        if source.get("type") in ("Directory", "DirectoryOrCreate"):
            path.mkdir(parents=True, exist_ok=True)
        return {"name": volume["name"], "hostPath": {**source, "path": str(path)}}

    def pod(self, pod_name: str, template: Obj) -> tuple[Obj, list[str], list[PlayedContainer]]:
        """The pod template as podman plays it, the podman volumes it makes (its emptyDirs), and what the
        caller needs to run its probes and check it."""
        template = copy.deepcopy(template)
        spec = template["spec"]
        spec["hostNetwork"] = True
        spec["volumes"] = [
            self.secret_volume(pod_name, v) if "secret" in v else self.host_path(v) if "hostPath" in v else v
            for v in spec.get("volumes", [])
        ]
        # podman 4.3 makes an emptyDir a volume named as the pod names it, one for every pod of the machine
        # that uses the name (web's, the worker's and beat's `tmp` would be one /tmp): each gets its pod's name
        empty_dirs = {v["name"]: f"{pod_name}-{v['name']}" for v in spec["volumes"] if "emptyDir" in v}
        for v in spec["volumes"]:
            v["name"] = empty_dirs.get(v["name"], v["name"])
        template.setdefault("metadata", {}).setdefault("annotations", {}).update(INIT_CONTAINER_TYPE)
        if spec.get("initContainers") and spec.get("restartPolicy", "Always") == "Always":
            # podman 4.3 gives init containers the pod's restart policy: Always would rerun them for ever
            # (containers/podman#16343). OnFailure restarts them, and the app's, only when they fail, as the
            # kubelet restarts init containers; the app's containers are checked to be running, never restarted.
            spec["restartPolicy"] = "OnFailure"
        played = []
        for kind, init in (("initContainers", True), ("containers", False)):
            for container in spec.get(kind, []):
                # the pod's hostname, which containerd and CRI-O put in every container's environment (exec
                # probes read it); podman 4.3 gives it to the container's first process only, not to `exec`
                env = {"HOSTNAME": pod_name} | self.environment(container, pod_name)
                container.pop("envFrom", None)
                container["env"] = [{"name": name, "value": value} for name, value in env.items()]
                for key in ("command", "args"):
                    if key in container:
                        container[key] = [expand(arg, env) for arg in container[key]]
                for mount in container.get("volumeMounts", []):
                    mount["name"] = empty_dirs.get(mount["name"], mount["name"])
                probes = {key: container.pop(key) for key in PROBES if key in container}
                # on the host's network a port is the node's: nothing to map (podman 4.3 refuses to try)
                ports = container.pop("ports", [])
                played.append(
                    PlayedContainer(
                        name=container["name"],
                        podman_name=f"{pod_name}-{container['name']}",
                        init=init,
                        security_context=spec.get("securityContext", {}) | container.get("securityContext", {}),
                        probes=probes,
                        ports={p["name"]: p["containerPort"] for p in ports if "name" in p},
                    )
                )
        return template, list(empty_dirs.values()), played


def played_pods(objs: Iterable[Obj], *, node_root: Path, node_name: str) -> list[PlayedPod]:
    """Every pod the render makes on one node, in the render's order: the Job's, the DaemonSet's one, and
    each Deployment's (podman names a Deployment's pods `<name>-pod-<i>`). The objects that make no pod
    (Namespaces, Services, NetworkPolicies, prometheus-operator's) have no part here; the ConfigMaps and
    Secrets make the pods' environment and Secret volumes."""
    objs = list(objs)
    kubelet = Kubelet(objs, node_root=node_root, node_name=node_name)
    pods = []
    for o in objs:
        kind, name = o["kind"], o["metadata"]["name"]
        if kind == "Deployment":
            assert o["spec"].get("replicas", 1) == 1, f"{name}: one pod per Deployment here"
            podman_name = f"{name}-pod-0"
            template, volumes, containers = kubelet.pod(podman_name, o["spec"]["template"])
            document = copy.deepcopy(o)
            document["spec"]["template"] = template
            # podman 4.3 gives a Deployment's pods the Deployment's annotations, not the template's
            document["metadata"].setdefault("annotations", {}).update(INIT_CONTAINER_TYPE)
        elif kind in ("Job", "DaemonSet"):
            podman_name = name
            template, volumes, containers = kubelet.pod(name, o["spec"]["template"])
            document = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {**template.get("metadata", {}), "name": name},
                "spec": template["spec"],
            }
        else:
            continue
        pods.append(
            PlayedPod(
                source=f"{kind}/{name}",
                podman_name=podman_name,
                document=document,
                volumes=volumes,
                containers=containers,
            )
        )
    return pods
