#!/usr/bin/env bash
# Build libfleetwatt_gputime.so on a GPU node (needs a C compiler, CUDA's cuda.h and CUPTI).
#   agent/gputime/build.sh [OUTPUT_DIR]      (default: agent/gputime/build)
# Finds CUDA under $CUDA_HOME, /usr/local/cuda, or the nvidia-cuda-cupti / nvidia-cuda-runtime Python
# wheels, and builds against the newest activity record structs its cupti_activity.h declares.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${1:-$here/build}"
mkdir -p "$out"

# CUDA_HOME first; then the CUPTI of the Python wheels (the one PyTorch loads: a process holds one
# libcupti, so the library should be built against that one where there is one); then the toolkit.
cands=("${CUDA_HOME:-}")
py="$(command -v python3 || true)"
if [[ -n "$py" ]]; then
  wheel_dirs="$("$py" - <<'PY' 2>/dev/null || true
import importlib.util, pathlib
for mod in ("nvidia.cu13", "nvidia.cuda_cupti", "nvidia.cuda_runtime", "nvidia"):
    try:
        spec = importlib.util.find_spec(mod)
    except Exception:
        continue
    for loc in (spec.submodule_search_locations or []) if spec else []:
        print(loc)
PY
)"
  while read -r d; do [[ -n "$d" ]] && cands+=("$d"); done <<<"$wheel_dirs"
fi
cands+=(/usr/local/cuda /usr/local/cuda-13.0 /usr/local/cuda-12)

find_file() {  # find_file PATTERN: first path ending so under the candidates
  local name="$1" c f
  for c in "${cands[@]}"; do
    [[ -n "$c" && -d "$c" ]] || continue
    f="$(find -L "$c" -maxdepth 6 -path "*/$name" -print -quit 2>/dev/null || true)"
    [[ -n "$f" ]] && { echo "$f"; return 0; }
  done
  return 1
}

cupti_h="$(find_file cupti_activity.h)" || { echo "build.sh: no cupti_activity.h (install CUDA's CUPTI)" >&2; exit 1; }
cuda_h="$(find_file cuda.h)" || { echo "build.sh: no cuda.h (install CUDA's headers)" >&2; exit 1; }
cupti_so="$(find_file 'libcupti.so*')" || { echo "build.sh: no libcupti.so" >&2; exit 1; }
# crt/host_defines.h sits beside cuda.h in a toolkit; in the Python wheels it comes with nvcc's headers.
crt_h="$(find_file crt/host_defines.h || true)"
extra_inc=()
[[ -n "$crt_h" ]] && extra_inc=(-I"$(dirname "$(dirname "$crt_h")")")
newest() { grep -o "} CUpti_Activity$1[0-9]*;" "$cupti_h" | tr -d '}; ' | sort -V | tail -1; }
kernel_t="$(newest Kernel)"; memcpy_t="$(newest Memcpy)"; memset_t="$(newest Memset)"
echo "build.sh: CUPTI headers $(dirname "$cupti_h"), cuda.h $(dirname "$cuda_h"), library $cupti_so"
echo "build.sh: records $kernel_t $memcpy_t $memset_t"
[[ -n "$kernel_t" && -n "$memcpy_t" && -n "$memset_t" ]] || { echo "build.sh: $cupti_h declares no activity records" >&2; exit 1; }
# Per-thread activity buffers came with CUPTI 12.x: asked for only where the header has them.
per_thread=()
grep -q "CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER" "$cupti_h" && per_thread=(-DFW_HAVE_PER_THREAD_BUFFERS=1)
cc="${CC:-cc}"
"$cc" -O2 -std=c11 -Wall -Wextra -fPIC -shared -fvisibility=hidden -o "$out/libfleetwatt_gputime.so" \
  -I"$(dirname "$cupti_h")" -I"$(dirname "$cuda_h")" "${extra_inc[@]}" \
  -DFW_KERNEL_T="$kernel_t" -DFW_MEMCPY_T="$memcpy_t" -DFW_MEMSET_T="$memset_t" "${per_thread[@]}" \
  "$here/fleetwatt_gputime.c" "$here/gputime_core.c" \
  -L"$(dirname "$cupti_so")" -Wl,-rpath,"$(dirname "$cupti_so")" -l:"$(basename "$cupti_so")" \
  -Wl,--allow-shlib-undefined -Wl,--no-undefined -lpthread -ldl
echo "build.sh: built $out/libfleetwatt_gputime.so"
