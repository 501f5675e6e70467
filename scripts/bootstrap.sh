#!/usr/bin/env bash
# Install what is missing and start what is not running: the virtual environment and its packages,
# Debian's prometheus and victoria-metrics (and, for the tests, chromium and CUDA's headers), apache2-utils (ab), Postgres, Redis, the database.
set -euo pipefail
cd "$(dirname "$0")/.."
want_chromium=${WANT_CHROMIUM:-0}

apt_install() {
  if [ "$(id -u)" != 0 ]; then echo "need root to apt-get install $*" >&2; exit 1; fi
  [ -n "${APT_UPDATED:-}" ] || { apt-get update -qq; APT_UPDATED=1; }
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

pkgs=()
command -v prometheus >/dev/null && command -v promtool >/dev/null || pkgs+=(prometheus)
# VictoriaMetrics (single node) and vmauth: the ingest's end-to-end tests run against both engines.
command -v victoria-metrics >/dev/null && command -v vmauth >/dev/null || pkgs+=(victoria-metrics)
if [ "$want_chromium" = 1 ]; then command -v chromium >/dev/null || pkgs+=(chromium); fi
command -v pg_isready >/dev/null || pkgs+=(postgresql postgresql-client)
command -v redis-server >/dev/null || pkgs+=(redis-server)
# ab: the load run of tests/faults/test_demo_web_load.py and `make bench`.
command -v ab >/dev/null || pkgs+=(apache2-utils)
# kubectl: `kubectl kustomize` renders deploy/k8s for tests/deploy/test_k8s_manifests.py.
command -v kubectl >/dev/null || pkgs+=(kubernetes-client)
# cc: the tests build the agent's GPU-time library (agent/gputime) and its pure core.
command -v cc >/dev/null || pkgs+=(gcc libc6-dev)
if [ ${#pkgs[@]} -gt 0 ]; then echo "installing ${pkgs[*]}"; apt_install "${pkgs[@]}"; fi

if [ ! -x .venv/bin/python ]; then python3 -m venv .venv; fi
if ! cmp -s requirements-dev.txt .venv/.installed-requirements 2>/dev/null || ! cmp -s requirements.txt .venv/.installed-runtime 2>/dev/null; then
  .venv/bin/pip install -q --upgrade pip
  .venv/bin/pip install -q -r requirements-dev.txt
  cp requirements-dev.txt .venv/.installed-requirements; cp requirements.txt .venv/.installed-runtime
fi
# The FinOps Foundation's FOCUS validator (tests/rollups/test_focus_export.py), in a venv of its own: it pins
# pandas 2 and numpy 1, the app pandas 3 and numpy 2.
if [ ! -x .venv-focus/bin/python ]; then python3 -m venv .venv-focus; fi
if ! cmp -s requirements-focus.txt .venv-focus/.installed-requirements 2>/dev/null; then
  .venv-focus/bin/pip install -q -r requirements-focus.txt
  cp requirements-focus.txt .venv-focus/.installed-requirements
fi
# CUDA's and CUPTI's headers and libcupti from NVIDIA's wheels (no driver, no GPU): the tests build the
# GPU-time injection library with agent/gputime/build.sh as a GPU node does (tests/agent/test_gputime_library.py).
cuda_headers=var/cuda-headers
cuda_wheels="nvidia-cuda-cupti-cu12==12.9.79 nvidia-cuda-runtime-cu12==12.9.79 nvidia-cuda-nvcc-cu12==12.9.86"
if [ "${WANT_CUDA_HEADERS:-0}" = 1 ] && [ "$(cat "$cuda_headers/.installed" 2>/dev/null)" != "$cuda_wheels" ]; then
  rm -rf "$cuda_headers"
  # shellcheck disable=SC2086
  .venv/bin/pip install -q --no-deps --target "$cuda_headers" $cuda_wheels
  echo "$cuda_wheels" >"$cuda_headers/.installed"
fi
if [ -f agent/pyproject.toml ] && ! .venv/bin/python -c "import fleetwatt_agent" 2>/dev/null; then
  .venv/bin/pip install -q -e ./agent
fi

# Postgres and Redis: the machine's servers, started if they are down.
if ! pg_isready -q -h 127.0.0.1 -p 5432; then
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -1)" main start
  for _ in $(seq 30); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 1; done
fi
if ! redis-cli -h 127.0.0.1 ping >/dev/null 2>&1; then
  mkdir -p /var/lib/redis /var/log/redis
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no --dir /var/lib/redis --logfile /var/log/redis/ci.log
  for _ in $(seq 30); do redis-cli -h 127.0.0.1 ping >/dev/null 2>&1 && break; sleep 0.5; done
fi
db=${FLEETWATT_DB_NAME:-fleetwatt}
psql -h 127.0.0.1 -U postgres -tAc "SELECT 1 FROM pg_database WHERE datname='$db'" | grep -q 1 \
  || createdb -h 127.0.0.1 -U postgres "$db"
