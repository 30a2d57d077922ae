#!/usr/bin/env bash
# Build libcupti_floor.so (see cupti_floor.cpp) with g++; CUPTI is dlopen'ed at run time, so
# only its headers are needed here.
#
#   bash bench/cupti_floor/build.sh [OUTDIR]        # -> OUTDIR/libcupti_floor.so (default: build/cupti_floor)
#
# Env: CXX (default g++), CUDA_HOME (default /usr/local/cuda), CUPTI_INCLUDE (a folder with
# cupti.h; default: the first of $CUDA_HOME/extras/CUPTI/include, $CUDA_HOME/include, the
# nvidia-cuda-cupti wheel's include folder of python3's site-packages).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
OUTDIR="${1:-$REPO/build/cupti_floor}"
CXX="${CXX:-g++}"
CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"

find_cupti_include() {
    local d
    for d in ${CUPTI_INCLUDE:-} "$CUDA_HOME/extras/CUPTI/include" "$CUDA_HOME/include" "$CUDA_HOME"/targets/*/include; do
        [[ -f "$d/cupti.h" && -f "$d/cupti_runtime_cbid.h" ]] && { echo "$d"; return 0; }
    done
    # PyTorch's CUPTI wheel (nvidia-cuda-cupti) ships headers too.
    python3 - <<'PYEOF' 2>/dev/null || return 1
import glob, os, sys
import nvidia
for root in nvidia.__path__:
    for h in glob.glob(os.path.join(root, "**", "cupti_runtime_cbid.h"), recursive=True):
        print(os.path.dirname(h)); sys.exit(0)
sys.exit(1)
PYEOF
}
find_cuda_include() {  # cuda.h, which cupti_callbacks.h includes
    local d
    for d in "$1" "$CUDA_HOME/include" "$CUDA_HOME"/targets/*/include; do
        [[ -f "$d/cuda.h" ]] && { echo "$d"; return 0; }
    done
    return 1
}

CUPTI_INC="$(find_cupti_include)" || { echo "build.sh: no cupti.h found (set CUPTI_INCLUDE)" >&2; exit 2; }
CUDA_INC="$(find_cuda_include "$CUPTI_INC")" || { echo "build.sh: no cuda.h found (set CUDA_HOME)" >&2; exit 2; }
mkdir -p "$OUTDIR"
# Every callback id name in this CUPTI's headers, for CUPTI_FLOOR_CBIDS=runtime:NAME,driver:NAME.
{
    sed -n 's/^[[:space:]]*CUPTI_RUNTIME_TRACE_CBID_\([A-Za-z0-9_]*\)[[:space:]]*=.*/\1/p' "$CUPTI_INC/cupti_runtime_cbid.h" |
        grep -v -x -E 'INVALID|SIZE|FORCE_INT' | sed 's/.*/CUPTI_FLOOR_RUNTIME(&)/'
    sed -n 's/^[[:space:]]*CUPTI_DRIVER_TRACE_CBID_\([A-Za-z0-9_]*\)[[:space:]]*=.*/\1/p' "$CUPTI_INC/cupti_driver_cbid.h" |
        grep -v -x -E 'INVALID|SIZE|FORCE_INT' | sed 's/.*/CUPTI_FLOOR_DRIVER(&)/'
} > "$OUTDIR/cupti_floor_cbids.inc"
set -x
"$CXX" -O2 -std=c++17 -shared -fPIC -fvisibility=hidden -Wall -Wextra \
    -I"$OUTDIR" -I"$CUPTI_INC" -I"$CUDA_INC" \
    -o "$OUTDIR/libcupti_floor.so" "$HERE/cupti_floor.cpp" -ldl
set +x
echo "build.sh: $OUTDIR/libcupti_floor.so ($(grep -c RUNTIME "$OUTDIR/cupti_floor_cbids.inc") runtime, $(grep -c DRIVER "$OUTDIR/cupti_floor_cbids.inc") driver cbid names; CUPTI headers $CUPTI_INC)"
