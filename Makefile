# fleetwatt: the commands people run. `make demo` and `make test` set everything up themselves.
SHELL := /bin/bash
PY := .venv/bin/python
export PYTHONUNBUFFERED := 1
# `make test` runs the suite in this many processes (pytest-xdist; tests/conftest.py says what stays in one).
TEST_PROCESSES ?= 2

.PHONY: demo test bootstrap lint run worker beat bench stop gpu-two-jobs gpu-accuracy gpu-time-campaign gpu-time-overhead migrate

bootstrap:
	@bash scripts/bootstrap.sh

demo: bootstrap
	@bash scripts/demo.sh

# The checks of `make lint`; `make test` runs them too, after the tests (so CI runs them).
define LINT_CHECKS
.venv/bin/ruff check apps fleetwatt tests bench agent
.venv/bin/ruff format --check apps fleetwatt tests bench agent
.venv/bin/mypy
endef

test:
	@WANT_CHROMIUM=1 WANT_CUDA_HEADERS=1 bash scripts/bootstrap.sh
	@DJANGO_DEBUG=1 $(PY) manage.py check >/dev/null
	$(PY) -m pytest -q -p no:cacheprovider -n $(TEST_PROCESSES) --durations=25
	$(LINT_CHECKS)

lint: bootstrap
	$(LINT_CHECKS)

migrate: bootstrap
	DJANGO_DEBUG=1 $(PY) manage.py migrate

run: bootstrap
	DJANGO_DEBUG=1 DJANGO_CONN_MAX_AGE=0 $(PY) manage.py runserver  # a thread per request: keep no connection

worker: bootstrap
	.venv/bin/celery -A fleetwatt worker -l info

beat: bootstrap
	.venv/bin/celery -A fleetwatt beat -l info -s var/celerybeat-schedule

bench: bootstrap
	@command -v ab >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq apache2-utils >/dev/null
	$(PY) bench/ingest_cluster_hour.py
	$(PY) bench/ingest_fanout.py
	$(PY) bench/dashboard_endpoints.py
	@if [ -f bench/agent_tick.py ]; then $(PY) bench/agent_tick.py; fi

# What `make demo` started: its processes, and the local Slurm when the demo was the one to start it.
stop:
	@for p in var/run/*.pid; do [ -f "$$p" ] && kill "$$(cat $$p)" 2>/dev/null; rm -f "$$p"; done
	@if [ -f var/run/slurm.started-by-demo ]; then bash scripts/slurm.sh stop 2>/dev/null || true; rm -f var/run/slurm.started-by-demo; fi
	@echo stopped

# On a GPU node (the H200 experiment of docs/agent-h200.md).
gpu-two-jobs:
	bash agent/scripts/gpu_two_jobs.sh

# On a GPU node: how right the split is against isolated runs (docs/accuracy.md); results in $$OUT or /tmp.
gpu-accuracy:
	python3 agent/scripts/accuracy_campaign.py

# On a GPU node: the same with the exact GPU-time library in every job (docs/accuracy.md, "Exact GPU time"),
# after the library's cost to the launch-bound job, 10 runs each way (about 7 minutes on an H100).
GPU_TIME_ARGS ?= --reps 1 --target-s 7 --idle-s 6 --overhead-reps 10 --overhead-kinds tiny --budget-s 520
gpu-time-campaign:
	bash agent/scripts/gpu_time_campaign.sh $(GPU_TIME_ARGS)

# Only the library's cost: 20 runs each way of the launch-bound job, 5 s each (about 6 minutes).
gpu-time-overhead:
	bash agent/scripts/gpu_time_campaign.sh --overhead-only --target-s 5 --overhead-reps 20 --overhead-kinds tiny
