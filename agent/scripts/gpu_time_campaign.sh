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
  nvidia-smi --query-gpu=name,driver_version,compute_mode,power.limit --format=csv
  nvidia-smi compute-policy -l 2>&1 | head -5
} 2>&1 | tee "$log"
[[ -f "$work/lib/libfleetwatt_gputime.so" ]] || { echo "gpu_time_campaign: the library did not build (see $log)"; exit 1; }
python3 "$here/accuracy_campaign.py" --out "$out" --work "$work/campaign" --gputime-lib "$work/lib/libfleetwatt_gputime.so" "$@"
