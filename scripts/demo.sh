#!/usr/bin/env bash
# The main job on an embedded default: build streamrace and analyse the bundled trace of the
# DeepSpeed ZeRO-1 overlap_comm bucket race (two ranks), printing the race report.
#   scripts/demo.sh                 # the bundled trace
#   scripts/demo.sh path/to/traces  # your own trace files or directories
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
scripts/install_deps.sh
build="${STREAMRACE_BUILD_DIR:-build}"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" --target streamrace -j"$(nproc)" >/dev/null
# libstreamrace.so too (with precise mode's device callbacks when that build has them), so that
# `build/bin/streamrace run -- CMD` works next; only where the CUDA toolkit's CUPTI headers are:
# without them the tracer target does not exist. Its CMakeFiles directory says so for any generator.
if [ -d "$build/tracer/CMakeFiles/streamrace_tracer.dir" ]; then
  cmake --build "$build" --target streamrace_tracer -j"$(nproc)" >/dev/null
else
  echo "streamrace: no CUPTI headers under /usr/local/cuda: libstreamrace.so not built, so 'run' cannot trace" >&2
fi
default_trace="samples/traces/zero1-synthetic"
[ -d samples/traces/deepspeed-0.14.2 ] && default_trace="samples/traces/deepspeed-0.14.2"
inputs=("$@")
((${#inputs[@]})) || inputs=("$default_trace")
echo "streamrace analyze ${inputs[*]}" >&2
set +e
"$build/bin/streamrace" analyze "${inputs[@]}"
status=$?
set -e
case $status in
  0) echo "(exit status 0: no races)" >&2 ;;
  1) echo "(exit status 1: races found)" >&2 ;;
  *) exit "$status" ;;
esac
# The demo itself succeeded whether or not the trace has races.
exit 0
