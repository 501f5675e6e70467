"""The app's image, built from the repository's Dockerfile with podman and run: its size, its user, its
read-only root, the app serving /healthz from it, and nothing secret inside (docs/deploy.md, "Containers
on a machine without Docker")."""

from __future__ import annotations

import json
import re
import secrets
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import requests
from django.db import connection

from apps.simulator.local_prometheus import free_port
from tests.deploy.containers import CANARY, BuiltImage, container_remove, image_filesystem, podman

# Set at 610 MB (Debian's python3, the pinned packages: numpy, pandas and pyarrow are half of it) plus room.
IMAGE_MAX_BYTES = 700_000_000
# The machine's own CAs (a TLS-inspecting proxy's, which pip is given while the image builds).
LOCAL_CA_FOLDER = Path("/usr/local/share/ca-certificates")
# A PEM private key's header followed by its base64 body (not the header alone, which libraries print).
PRIVATE_KEY = re.compile(rb"-----BEGIN [A-Z ]*PRIVATE KEY-----\r?\n[A-Za-z0-9+/=]{40,}")
PRODUCTION_ENV = {
    "DJANGO_DEBUG": "0",
    "DJANGO_ALLOWED_HOSTS": "127.0.0.1,fleetwatt.example.org",
    "DJANGO_CSRF_TRUSTED_ORIGINS": "https://fleetwatt.example.org",
    "REDIS_URL": "redis://127.0.0.1:6379/11",
}


def env_args(env: dict[str, str]) -> list[str]:
    return [arg for name, value in env.items() for arg in ("--env", f"{name}={value}")]


def read_only_run(image: BuiltImage, *command: str, env: dict[str, str] | None = None, network: str = "none") -> str:
    """The command in a container as deploy/k8s runs the app: read-only root, /tmp the only place to write
    (podman's own tmpfs on /run and /var/tmp left out)."""
    proc = podman(
        "run",
        "--rm",
        "--read-only",
        "--read-only-tmpfs=false",
        "--tmpfs",
        "/tmp",
        "--network",
        network,
        *env_args(env or {}),
        image.tag,
        *command,
        timeout_s=180,
        check=False,
    )
    assert proc.returncode == 0, f"{' '.join(command)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def test_image_builds_over_debian_and_stays_lean(app_image: BuiltImage, capsys: pytest.CaptureFixture[str]) -> None:
    # given the image built from the Dockerfile over the debootstrapped debian:bookworm-slim
    config: dict[str, Any] = json.loads(podman("image", "inspect", app_image.tag).stdout)[0]
    # then it is reported, and no larger than its budget
    with capsys.disabled():
        print(f"\napp image: {app_image.size_bytes / 1e6:.0f} MB, built in {app_image.build_s:.0f} s")  # noqa: T201  # for docs/benchmarks.md
    assert app_image.size_bytes <= IMAGE_MAX_BYTES, f"{app_image.size_bytes / 1e6:.0f} MB"
    # and it holds two layers: the base's and the app's (vfs keeps each whole)
    assert len(config["RootFS"]["Layers"]) == 2
    assert config["Config"]["User"] == "10001:10001"


def test_image_runs_as_its_user_on_a_read_only_root(app_image: BuiltImage) -> None:
    # when a shell in the image tries to write where it may not, and where it may
    out = read_only_run(
        app_image,
        "sh",
        "-c",
        "id -u; id -g; for d in /app /app/var /opt/venv /etc; do touch $d/x 2>/dev/null && echo wrote $d; done;"
        " touch /tmp/x && echo wrote /tmp",
    )
    # then it is uid/gid 10001 and only /tmp is writable
    assert out.split() == ["10001", "10001", "wrote", "/tmp"]


def test_image_passes_djangos_deployment_checks(app_image: BuiltImage) -> None:
    # given production's settings, as a Secret and a ConfigMap give them
    env = PRODUCTION_ENV | {
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
        "DATABASE_URL": "postgres://fleetwatt_app:unused@db.invalid:5432/fleetwatt",
    }
    # when Django checks them inside the image (no database is needed)
    out = read_only_run(app_image, "python", "manage.py", "check", "--deploy", "--fail-level", "WARNING", env=env)
    # then nothing is found
    assert "System check identified no issues" in out


@pytest.mark.django_db(transaction=True)
def test_image_serves_healthz_from_a_read_only_root(app_image: BuiltImage) -> None:
    # given the image's own command (gunicorn) on the host's network, with the test database and Redis
    db = connection.settings_dict
    password = f":{db['PASSWORD']}" if db["PASSWORD"] else ""
    database_url = f"postgres://{db['USER']}{password}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"
    port = free_port()
    env = PRODUCTION_ENV | {
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
        "DJANGO_SECURE_SSL_REDIRECT": "0",
        "DATABASE_URL": database_url,
        "GUNICORN_BIND": f"127.0.0.1:{port}",
        "WEB_CONCURRENCY": "1",
    }
    name = f"fleetwatt-test-web-{uuid.uuid4().hex[:12]}"
    try:
        podman(
            "run",
            "--detach",
            "--name",
            name,
            "--read-only",
            "--read-only-tmpfs=false",
            "--tmpfs",
            "/tmp",
            "--network",
            "host",
            *env_args(env),
            app_image.tag,
        )
        # when /healthz is asked, until gunicorn answers (30 s at most)
        deadline = time.monotonic() + 30
        while True:
            try:
                resp = requests.get(f"http://127.0.0.1:{port}/healthz", timeout=5)
                break
            except requests.ConnectionError:
                running = podman("inspect", "--format", "{{.State.Running}}", name).stdout.strip()
                assert running == "true" and time.monotonic() < deadline, podman("logs", name).stderr[-3000:]
                time.sleep(0.5)
        # then the app answers with its dependencies, both reached from inside the container
        assert resp.status_code == 200, resp.text
        body = resp.json()
        assert body["status"] == "ok"
        assert body["checks"]["postgres"]["ok"] and body["checks"]["redis"]["ok"]
        # and a static file comes from the files collected into the image
        login = requests.get(f"http://127.0.0.1:{port}/accounts/login/", timeout=10)
        assert login.status_code == 200
        css = re.search(r'href="(/static/[^"]+\.css)"', login.text)
        assert css, "no stylesheet on the login page"
        assert requests.get(f"http://127.0.0.1:{port}{css.group(1)}", timeout=10).status_code == 200
    finally:
        container_remove(name)


def local_ca_bodies() -> dict[str, bytes]:
    """The base64 body's first line of each of the machine's own CA certificates."""
    bodies = {}
    for path in sorted(LOCAL_CA_FOLDER.glob("*.crt")) if LOCAL_CA_FOLDER.is_dir() else []:
        lines = [line for line in path.read_bytes().splitlines() if line and not line.startswith(b"-----")]
        if lines:
            bodies[path.name] = lines[0]
    return bodies


def test_image_holds_no_secret(app_image: BuiltImage) -> None:
    # given secrets planted in the build context (tests/deploy/containers.py: CANARY_FILES), and the CA
    # bundle pip was given for the build
    needles = {"planted secret": CANARY.encode()} | {
        f"the machine's CA {name}": body for name, body in local_ca_bodies().items()
    }
    # when every file of the image is read
    found: list[str] = []
    names: list[str] = []
    for member, reader in image_filesystem(app_image.tag):
        path = "/" + member.name.lstrip("./")
        base = path.rsplit("/", 1)[-1]
        if base == ".env" or (base.startswith(".env.") and base != ".env.example") or base.endswith((".key", ".p12")):
            names.append(path)
        if path.startswith("/app/") and base.endswith(".pem"):
            names.append(path)
        if path in {"/run/secrets/pip-ca", "/app/.git"}:
            names.append(path)
        if reader is not None and member.size < 20_000_000:
            data = reader.read()
            found += [f"{what} in {path}" for what, needle in needles.items() if needle in data]
            if not data.startswith(b"\x7fELF") and PRIVATE_KEY.search(data):  # gnutls keeps self-test keys
                found.append(f"a private key in {path}")
    # then none is there: no .env, no key, no certificate of the checkout's, no planted value, not the
    # machine's CA bundle, and no secret in the image's settings or history
    assert names == []
    assert found == []
    config = json.loads(podman("image", "inspect", app_image.tag).stdout)[0]["Config"]
    secret_names = [env for env in config.get("Env", []) if re.match(r"[^=]*(SECRET|PASSWORD|TOKEN|_URL)", env)]
    assert secret_names == []
    history = podman("history", "--no-trunc", "--format", "{{.CreatedBy}}", app_image.tag).stdout
    assert [what for what, needle in needles.items() if needle.decode() in history] == []
