"""Who can read the agent: the token on /metrics and /jobs, /jobs for loopback peers only without one,
the refusal to listen openly without a token, and the deployment files that bind it."""

from __future__ import annotations

import hmac
import json
import os
import re
import shlex
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from fleetwatt_agent import auth
from fleetwatt_agent.auth import TokenFile, bearer_matches, is_loopback
from fleetwatt_agent.config import load
from fleetwatt_agent.errors import ConfigError

from .conftest import AGENT_SRC
from .httpkit import (
    TOKEN,
    agent_command,
    agent_env,
    bearer,
    listen_backlog,
    non_loopback_address,
    request,
    running_agent,
    serving,
    small_trace,
)

DEPLOY = AGENT_SRC / "deploy"


def token_file(tmp_path: Path, token: str = TOKEN) -> Path:
    path = tmp_path / "token"
    path.write_text(token + "\n")
    path.chmod(0o600)
    return path


# -- the token ------------------------------------------------------------------------------------------


def test_a_token_guards_metrics_and_jobs_but_not_healthz(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    compared: list[int] = []
    real = hmac.compare_digest

    def spy(a: Any, b: Any) -> bool:
        compared.append(1)
        return real(a, b)

    monkeypatch.setattr(auth.hmac, "compare_digest", spy)
    with serving(token=TokenFile(str(token_file(tmp_path)))) as server:
        port = server.server_port
        wrong = [
            {},
            bearer("fw-test-token-0000000000000000"),
            bearer(TOKEN + "x"),
            bearer(TOKEN[:-1]),
            {"Authorization": "Basic " + TOKEN},
            {"Authorization": "Bearer"},
            {"Authorization": TOKEN},
        ]
        for path in ("/metrics", "/jobs"):
            for headers in wrong:
                status, response_headers, body = request(port, path, headers)
                assert status == 401, (path, headers)
                assert response_headers["WWW-Authenticate"].startswith("Bearer"), response_headers
                assert b"fleetwatt_job" not in body and b"slurm/" not in body
        status, _, body = request(port, "/metrics", bearer())
        assert status == 200 and b'job_key="slurm/4242"' in body
        status, _, body = request(port, "/jobs", {"Authorization": f"bearer  {TOKEN} "})  # scheme in any case
        assert status == 200 and {j["job_key"] for j in json.loads(body)["jobs"]} == {"slurm/4242", "slurm/4243"}
        assert request(port, "/healthz")[0] == 200  # probes need no token
        assert request(port, "/")[0] == 200
    assert compared, "the token was not compared with hmac.compare_digest"


def test_a_rotated_token_takes_effect_and_a_broken_file_keeps_the_last_one(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = token_file(tmp_path)
    with serving(token=TokenFile(str(path))) as server:
        port = server.server_port
        assert request(port, "/metrics", bearer())[0] == 200
        rotated = "fw-rotated-token-4e1b99d07c2a11f3aa"
        path.write_text(rotated + "\n")
        os.utime(path, ns=(time.time_ns(), time.time_ns() + 10**9))  # a new stamp even on a coarse clock
        assert request(port, "/metrics", bearer())[0] == 401
        assert request(port, "/metrics", bearer(rotated))[0] == 200
        path.write_text("")  # half-written or emptied: never fall back to serving without a token
        os.utime(path, ns=(time.time_ns(), time.time_ns() + 2 * 10**9))
        assert request(port, "/metrics", bearer(rotated))[0] == 200
        assert request(port, "/metrics")[0] == 401
    assert any("keeping the last token" in r.getMessage() for r in caplog.records)


def test_bearer_matches_and_loopback() -> None:
    token = TOKEN.encode()
    assert bearer_matches(f"Bearer {TOKEN}", token)
    assert bearer_matches(f"BEARER {TOKEN}", token)
    assert not bearer_matches(None, token)
    assert not bearer_matches(f"Bearer {TOKEN}", b"")
    assert not bearer_matches(f"Token {TOKEN}", token)
    assert not bearer_matches(f"Bearer {TOKEN}\u00e9", token)
    for host in ("127.0.0.1", "127.8.9.10", "::1", "[::1]", "::ffff:127.0.0.1", "localhost", "LOCALHOST"):
        assert is_loopback(host), host
    for host in ("0.0.0.0", "::", "[::]", "10.0.0.7", "192.0.2.2", "::ffff:10.0.0.7", "gpu-node-01", ""):
        assert not is_loopback(host), host


def test_without_a_token_jobs_answers_only_to_loopback_peers() -> None:
    address = non_loopback_address()
    if address is None:
        pytest.skip("this machine has no non-loopback address to connect from")
    with serving(host="0.0.0.0") as server:  # what --allow-unauthenticated serves
        port = server.server_port
        assert request(port, "/jobs")[0] == 200  # from 127.0.0.1
        status, _, body = request(port, "/jobs", host=address)  # from a non-loopback address
        assert status == 403 and b"slurm/" not in body and b"--auth-token-file" in body
        assert request(port, "/metrics", host=address)[0] == 200
        assert request(port, "/healthz", host=address)[0] == 200


# -- start-up ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("listen", ["0.0.0.0:9877", "[::]:9877", "10.1.2.3:9877", "gpu-node-01:9877"])
def test_an_open_address_without_a_token_is_refused(listen: str, tmp_path: Path) -> None:
    for argv, env in (
        (["--listen", listen], {}),
        ([], {"FLEETWATT_AGENT_LISTEN": listen}),
    ):
        with pytest.raises(ConfigError) as err:
            load(argv, env)
        message = str(err.value)
        assert "refusing to listen" in message and "--auth-token-file" in message
        assert "--allow-unauthenticated" in message and "\n" not in message
    # the operator chooses one or the other, by flag or environment
    assert load(["--listen", listen, "--allow-unauthenticated"], {}).allow_unauthenticated
    assert load(["--listen", listen], {"FLEETWATT_AGENT_ALLOW_UNAUTHENTICATED": "1"}).allow_unauthenticated
    path = str(token_file(tmp_path))
    assert load(["--listen", listen, "--auth-token-file", path], {}).auth_token_file == path
    assert load(["--listen", listen], {"FLEETWATT_AGENT_AUTH_TOKEN_FILE": path}).auth_token_file == path


def test_loopback_needs_no_token_and_bad_token_files_are_refused(tmp_path: Path) -> None:
    for listen in ("127.0.0.1:9877", "localhost:9877", "[::1]:9877", ":9877"):
        cfg = load(["--listen", listen], {})
        assert cfg.auth_token_file is None and not cfg.allow_unauthenticated
    empty = tmp_path / "empty"
    empty.write_text("\n")
    short = tmp_path / "short"
    short.write_text("hunter2\n")
    spaced = tmp_path / "spaced"
    spaced.write_text("two words but long enough\n")
    for path, why in (
        (tmp_path / "missing", "No such file"),
        (empty, "empty"),
        (short, "shorter than 16"),
        (spaced, "one word"),
    ):
        with pytest.raises(ConfigError, match=why):
            load(["--auth-token-file", str(path)], {})


def test_http_settings_flags_environment_and_defaults() -> None:
    cfg = load([], {})
    assert (cfg.http_workers, cfg.http_timeout_s, cfg.http_backlog) == (8, 5.0, 128)
    env = {"FLEETWATT_AGENT_HTTP_WORKERS": "3", "FLEETWATT_AGENT_HTTP_TIMEOUT_S": "2.5"}
    cfg = load(["--http-backlog", "512"], {**env, "FLEETWATT_AGENT_HTTP_BACKLOG": "64"})
    assert (cfg.http_workers, cfg.http_timeout_s, cfg.http_backlog) == (3, 2.5, 512)
    for argv in (
        ["--http-workers", "0"],
        ["--http-timeout-s", "0"],
        ["--http-timeout-s", "inf"],
        ["--http-backlog", "0"],
    ):
        with pytest.raises(ConfigError):
            load(argv, {})


def test_the_command_refuses_an_open_address_with_one_line_and_status_2(tmp_path: Path) -> None:
    trace = small_trace(tmp_path / "trace.jsonl")
    proc = subprocess.run(
        agent_command(trace, "--replay-exit", "--listen", "0.0.0.0:0"),
        env=agent_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert proc.stdout == ""  # it never listened
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("fleetwatt-agent: refusing to listen on 0.0.0.0:0"), lines
    # chosen explicitly, it starts, and says at start what it serves to whom
    proc = subprocess.run(
        agent_command(trace, "--replay-exit", "--listen", "0.0.0.0:0", "--allow-unauthenticated"),
        env=agent_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert "listening on http://0.0.0.0:" in proc.stdout and "no token" in proc.stdout
    assert "WARNING" in proc.stderr and "without a token on 0.0.0.0" in proc.stderr


def test_the_command_with_a_token_file_from_the_environment(tmp_path: Path) -> None:
    trace = small_trace(tmp_path / "trace.jsonl")
    env = agent_env(FLEETWATT_AGENT_AUTH_TOKEN_FILE=str(token_file(tmp_path)), FLEETWATT_AGENT_HTTP_TIMEOUT_S="0.5")
    with running_agent(trace, ["--listen", "127.0.0.1:0", "--http-backlog", "64"], env) as port:
        status, headers, _ = request(port, "/metrics")
        assert status == 401 and headers["WWW-Authenticate"].startswith("Bearer")
        assert request(port, "/jobs")[0] == 401
        status, _, body = request(port, "/jobs", bearer())
        assert status == 200 and json.loads(body)["jobs"][0]["user"] == "ada"
        assert b"fleetwatt_job_info" in request(port, "/metrics", bearer())[2]
        assert listen_backlog(port) in (None, 64)
        # --http-timeout-s reaches the server: an idle connection is closed after about 0.5 s, not 5
        with socket.create_connection(("127.0.0.1", port), timeout=10) as idle:
            t0 = time.monotonic()
            assert idle.recv(1) == b""
            assert time.monotonic() - t0 < 4.0


# -- the deployment files ---------------------------------------------------------------------------------


def _config_lines(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if line.strip() and not line.lstrip().startswith("#")]


def test_the_image_listens_on_loopback_by_default() -> None:
    lines = _config_lines(DEPLOY / "Dockerfile")
    assert not [line for line in lines if "0.0.0.0" in line], lines
    cmd = next(line for line in lines if line.startswith("CMD "))
    cfg = load(json.loads(cmd[len("CMD ") :]), {})
    assert is_loopback(cfg.listen_host) and cfg.listen_port == 9877


def test_the_daemonset_binds_its_address_with_a_token_and_admits_only_prometheus(tmp_path: Path) -> None:
    yaml = pytest.importorskip("yaml")
    docs = [d for d in yaml.safe_load_all((DEPLOY / "daemonset.yaml").read_text()) if d]
    assert not [line for line in _config_lines(DEPLOY / "daemonset.yaml") if "0.0.0.0" in line]
    ds = next(d for d in docs if d["kind"] == "DaemonSet")
    pod = ds["spec"]["template"]
    container = next(c for c in pod["spec"]["containers"] if c["name"] == "agent")
    args: list[str] = container["args"]
    assert not pod["spec"].get("hostNetwork"), "NetworkPolicy does not apply to hostNetwork pods"
    # the address is the pod's own, from the downward API
    env = {e["name"]: e for e in container["env"]}
    listen = args[args.index("--listen") + 1]
    match = re.fullmatch(r"\$\((\w+)\):9877", listen)
    assert match, listen
    assert env[match.group(1)]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    # the token comes from a Secret, mounted read-only
    token_path = args[args.index("--auth-token-file") + 1]
    mount = next(m for m in container["volumeMounts"] if token_path.startswith(m["mountPath"].rstrip("/") + "/"))
    assert mount.get("readOnly") is True
    volume = next(v for v in pod["spec"]["volumes"] if v["name"] == mount["name"])
    assert volume["secret"]["secretName"]
    # the arguments pass the agent's own checks with a pod address and that token
    local_token = token_file(tmp_path)
    argv = [str(local_token) if a == token_path else a.replace(listen, "10.42.0.7:9877") for a in args]
    cfg = load(argv, {})
    assert (cfg.listen_host, cfg.auth_token_file) == ("10.42.0.7", str(local_token))
    # and a NetworkPolicy admits only Prometheus's pods, to port 9877
    policy = next(d for d in docs if d["kind"] == "NetworkPolicy")
    assert policy["metadata"]["namespace"] == ds["metadata"]["namespace"]
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    [rule] = policy["spec"]["ingress"]
    [source] = rule["from"]  # one element: namespace AND pod labels, not either
    assert source["namespaceSelector"]["matchLabels"] == {"kubernetes.io/metadata.name": "monitoring"}
    assert source["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "prometheus"}
    assert rule["ports"] == [{"protocol": "TCP", "port": 9877}]


def test_the_systemd_unit_binds_a_node_address_with_the_token() -> None:
    unit = DEPLOY / "fleetwatt-agent.service"
    lines = _config_lines(unit)
    assert not [line for line in lines if "0.0.0.0" in line], lines
    env: dict[str, str] = {}
    for line in lines:
        if line.startswith("Environment="):
            for word in shlex.split(line[len("Environment=") :]):
                name, _, value = word.partition("=")
                env[name] = value
    assert env.get("FLEETWATT_AGENT_AUTH_TOKEN_FILE", "").startswith("/")
    text = unit.read_text()
    # the header documents a node address for /etc/default/fleetwatt-agent, never 0.0.0.0
    documented = re.findall(r"FLEETWATT_AGENT_LISTEN=(\S+)", text)
    assert documented and all(not v.startswith("0.0.0.0") for v in documented), documented
    assert any(not is_loopback(v.rpartition(":")[0]) for v in documented), documented
