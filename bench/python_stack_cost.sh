#!/usr/bin/env bash
# The tracer's cost per call from Python, on the CPU machine (no GPU): a Python loop calls the
# fake NCCL framework of the tracer tests (tests/tracer/fake/, built with the tests) through
# ctypes.PyDLL at a given Python stack depth; each call is intercepted by libstreamrace.so's
# NCCL interposer and recorded with its Python stack, as a traced PyTorch op would be.
# Interleaved rounds: untraced, traced with STREAMRACE_STACKS=none, traced with stacks (auto),
# the same without the call-site cache (STREAMRACE_PYTHON_SITES=0: every call walks the C API),
# and the same with a second library (BASELINE_LIB, e.g. an earlier build) when given.
# GIL=held (default) calls through ctypes.PyDLL, which keeps the GIL, as Python code calling
# a C extension that does not release it; GIL=released through ctypes.CDLL, which releases it
# as PyTorch's ops do (the tracer then reads frames without it, or takes it back for the C API).
#
#   bench/python_stack_cost.sh [BUILD_DIR]     env: ROUNDS (5), CALLS (5000 runs x 8 calls),
#                                              DEPTH (20 Python frames), GIL, BASELINE_LIB
set -u
build=${1:-build}
lib=$(realpath "$build/lib/libstreamrace.so")
fw=$(realpath "$build/tests/tracer/fake_nccl/libtracer_fake_framework.so")
ROUNDS=${ROUNDS:-5} CALLS=${CALLS:-5000} DEPTH=${DEPTH:-20} GIL=${GIL:-held}
loop="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/python_stack_loop.py"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
one() {  # LIB STACKS SITES
  if [ -z "$1" ]; then python3 "$loop" "$fw" "$CALLS" "$DEPTH" "$GIL"; return; fi
  rm -rf "$tmp/t" && mkdir -p "$tmp/t"
  env -u CUDA_INJECTION64_PATH LD_PRELOAD="$1" STREAMRACE_OUT="$tmp/t" STREAMRACE_STACKS="$2" \
    STREAMRACE_PYTHON_SITES="${3:-1}" python3 "$loop" "$fw" "$CALLS" "$DEPTH" "$GIL"
}
configs=("untraced||" "nostacks|$lib|none" "stacks|$lib|auto" "stacks_nosites|$lib|auto|0")
[ -n "${BASELINE_LIB:-}" ] && configs+=("baseline_nostacks|$(realpath "$BASELINE_LIB")|none" "baseline_stacks|$(realpath "$BASELINE_LIB")|auto")
declare -A vals
for ((r = 0; r < ROUNDS; r++)); do
  for ((i = 0; i < ${#configs[@]}; i++)); do
    IFS='|' read -r name l s sites <<<"${configs[$(((i + r) % ${#configs[@]}))]}"
    vals[$name]+="$(one "$l" "$s" "$sites") "
  done
done
echo "us per traced NCCL call from Python, depth $DEPTH, GIL $GIL, $((CALLS * 8)) calls per run, $ROUNDS interleaved rounds:"
for c in "${configs[@]}"; do
  name=${c%%|*}
  python3 -c "import statistics,sys; v=sorted(map(float,sys.argv[2].split())); print(f'  {sys.argv[1]:<18} median {statistics.median(v):.3f}  min {v[0]:.3f}  max {v[-1]:.3f}')" "$name" "${vals[$name]}"
done
