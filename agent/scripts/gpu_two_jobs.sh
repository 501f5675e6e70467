#!/usr/bin/env bash
# The two-jobs experiment (docs/agent-h200.md) on GPU 0 of this machine (make gpu-two-jobs).
# Usage: bash agent/scripts/gpu_two_jobs.sh [OUTDIR] [--dry-run] [--together SECONDS]
# OUTDIR defaults to $OUT (the device machine's output folder), else /tmp/fleetwatt-gpu-two-jobs.
# Installs nothing: runs the agent from the source tree (PYTHONPATH=agent) with the machine's python3,
# which needs torch, nvidia-ml-py (pynvml) and prometheus-client.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
outdir="${OUT:-/tmp/fleetwatt-gpu-two-jobs}"
if [[ $# -gt 0 && "$1" != --* ]]; then outdir="$1"; shift; fi
python="${PYTHON:-python3}"
export PYTHONPATH="agent${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
exec "$python" agent/scripts/gpu_two_jobs.py --out "$outdir" "$@"
