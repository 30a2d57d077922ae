#!/usr/bin/env bash
# The tracer's Python stack per traced call, in instructions, on the CPU machine: a Python loop
# at a given stack depth calls the tracer tests' fake NCCL framework (tests/tracer/fake/, built
# with the tests) through ctypes, each call intercepted by libstreamrace.so's NCCL interposer and
# recorded with its Python stack, as a traced PyTorch op would be (bench/python_stack_cost.sh
# times the same loop). Under `valgrind --tool=callgrind`, counted only inside
# StackCapture::capture() with everything it calls (the sampled checks against the C API's walk
# included: TOGGLE='*StackCapture::capture*', the pattern used until session 38, turned counting
# off again in the nested capture functions and so left those checks out), the difference of a
# run of 2N loop turns and one of N (8 calls a turn; the set-up cancels), per call.
# Deterministic. TOGGLE sets what callgrind counts.
#
#   bench/python_stack_instructions.sh [BUILD_DIR] [LIB]   env: N (2000), DEPTH (20), GIL (held|released),
#                                                            SITES (same|alternate, default same),
#                                                            PYTHON (the interpreter, default python3;
#                                                            e.g. ~/.pyenv/versions/3.12.1/bin/python3.12)
# SITES=alternate: 4 calls a turn from 4 lines, none at the site of the call before it.
#
# LIB defaults to BUILD_DIR/lib/libstreamrace.so (another build's library compares the two).
# KEEP=DIR keeps the callgrind files there (callgrind_annotate --auto=yes shows the lines).
set -euo pipefail
build=${1:-build}
lib=$(realpath "${2:-$build/lib/libstreamrace.so}")
fw=$(realpath "$build/tests/tracer/fake_nccl/libtracer_fake_framework.so")
N=${N:-2000} DEPTH=${DEPTH:-20} GIL=${GIL:-held} SITES=${SITES:-same}
per_turn=8; [[ "$SITES" == alternate ]] && per_turn=4
command -v valgrind >/dev/null || { echo "python_stack_instructions: valgrind is not installed (apt-get install valgrind)" >&2; exit 2; }
py=$("${PYTHON:-python3}" -c 'import sys; print(sys.executable)')  # the interpreter itself, not a shim script
loop="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/python_stack_loop.py"
tmp=${KEEP:-$(mktemp -d)}; mkdir -p "$tmp"
[[ -n "${KEEP:-}" ]] || trap 'rm -rf "$tmp"' EXIT
total() { callgrind_annotate "$1" | awk '/PROGRAM TOTALS/ {gsub(",", ""); print $1}'; }
for n in "$N" "$((2 * N))"; do
  mkdir -p "$tmp/t$n"
  env -u CUDA_INJECTION64_PATH LD_PRELOAD="$lib" STREAMRACE_OUT="$tmp/t$n" STREAMRACE_STACKS=auto \
    valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.$n" --toggle-collect="${TOGGLE:-streamrace::tracer::StackCapture::capture()}" \
    "$py" "$loop" "$fw" "$n" "$DEPTH" "$GIL" "$SITES" >"$tmp/log.$n" 2>&1 || { cat "$tmp/log.$n" >&2; exit 2; }
done
a=$(total "$tmp/cg.$N") b=$(total "$tmp/cg.$((2 * N))")
echo "python stack, depth $DEPTH, GIL $GIL, sites $SITES: $(( (b - a) / (N * per_turn) )) instructions per traced call ($lib)"
