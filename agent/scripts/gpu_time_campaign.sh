#!/usr/bin/env bash
# On a GPU node: build the exact GPU-time library, check it in one CUDA process, then run the accuracy
# campaign (docs/accuracy.md) with it in every job, after measuring what it costs a job alone.
#   agent/scripts/gpu_time_campaign.sh [campaign options...]     results in $OUT or /tmp/fleetwatt-accuracy
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${OUT:-/tmp/fleetwatt-accuracy}"
work="${WORK:-/tmp/fleetwatt-gputime-work}"
mkdir -p "$out" "$work"
log="$out/build.log"
{
  echo "== build"; date -u
  bash "$here/../gputime/build.sh" "$work/lib" || exit 1
  echo "== one process with the library"
  dir="$work/smoke"; rm -rf "$dir"; mkdir -p "$dir"
  CUDA_INJECTION64_PATH="$work/lib/libfleetwatt_gputime.so" FLEETWATT_GPUTIME_DIR="$dir" python3 - <<'PY'
import time, torch
a = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
t0 = time.time()
for _ in range(200):
    a @ a
torch.cuda.synchronize()
print(f"200 products in {time.time() - t0:.3f} s")
PY
  echo "rc $?"; ls -la "$dir"; cat "$dir"/*.json
  echo "== a launch-bound process: traced in windows, every kernel traced, no library"
  for how in windows every-kernel none; do
    rm -rf "$dir"; mkdir -p "$dir"
    env_lib=(CUDA_INJECTION64_PATH="$work/lib/libfleetwatt_gputime.so" FLEETWATT_GPUTIME_DIR="$dir")
    [[ "$how" == every-kernel ]] && env_lib+=(FLEETWATT_GPUTIME_WINDOW_ABOVE=0)
    [[ "$how" == none ]] && env_lib=()
    env "${env_lib[@]}" python3 - "$how" <<'PY'
import sys, time, torch
x = torch.zeros(4096, device="cuda")
for _ in range(2000):
    x.add_(1.0)
torch.cuda.synchronize()
t0 = time.time()
for _ in range(200000):
    x.add_(1.0)
torch.cuda.synchronize()
print(f"{sys.argv[1]}: 200,000 tiny kernels in {time.time() - t0:.3f} s")
PY
    python3 - "$dir" <<'PY'
import json, pathlib, sys
for f in pathlib.Path(sys.argv[1]).glob("*.json"):
    d = json.loads(f.read_text())
    print({"windowed": d.get("windowed"), "gpus": [{k: g.get(k) for k in ("busy_ns", "estimated_ns", "records")} for g in d["gpus"]]})
PY
  done
  nvidia-smi --query-gpu=name,driver_version,compute_mode,power.limit --format=csv
  nvidia-smi compute-policy -l 2>&1 | head -5
} 2>&1 | tee "$log"
[[ -f "$work/lib/libfleetwatt_gputime.so" ]] || { echo "gpu_time_campaign: the library did not build (see $log)"; exit 1; }
python3 "$here/accuracy_campaign.py" --out "$out" --work "$work/campaign" --gputime-lib "$work/lib/libfleetwatt_gputime.so" "$@"
