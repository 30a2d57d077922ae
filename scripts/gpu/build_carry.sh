#!/usr/bin/env bash
# Builds what the GPU machine runs, here on the CPU machine, into gpu-carry/ (ignored by git):
#   gpu-carry/bin/streamrace, gpu-carry/bin/streamrace-replay-gpu,
#   gpu-carry/lib/libstreamrace.so, gpu-carry/lib/streamrace_precise_patches.fatbin,
#   gpu-carry/bench/streamrace-launch-replay (with its shared object: LD_LIBRARY_PATH=gpu-carry/bench)
# The GPU machine has no LLVM libunwind, so the tracer is built here, self-contained, and
# carried (`carry: ["gpu-carry"]`). Precise mode is built when the Sanitizer API headers can be
# had (as in scripts/test.sh). Usage: scripts/gpu/build_carry.sh [BUILD_DIR]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
build="${1:-build-carry}"
scripts/install_deps.sh
precise=(-DSTREAMRACE_BUILD_PRECISE=OFF)
if [ -f /usr/local/cuda/compute-sanitizer/include/sanitizer_patching.h ]; then
  precise=(-DSTREAMRACE_BUILD_PRECISE=ON -DSTREAMRACE_SANITIZER_ROOT=/usr/local/cuda/compute-sanitizer)
elif sanitizer_root=$(scripts/fetch_sanitizer_api.sh "$(realpath -m "$build")/_sanitizer_api"); then
  precise=(-DSTREAMRACE_BUILD_PRECISE=ON "-DSTREAMRACE_SANITIZER_ROOT=$sanitizer_root")
fi
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DSTREAMRACE_BUILD_TESTS=OFF -DSTREAMRACE_BUILD_REPLAY_GPU=ON \
  "${precise[@]}" "${launcher[@]}" >/dev/null
cmake --build "$build" -j"$(nproc)" --target streamrace streamrace_tracer streamrace-replay-gpu streamrace-launch-replay
rm -rf gpu-carry && mkdir -p gpu-carry/bin gpu-carry/lib gpu-carry/bench
cp "$build/bin/streamrace" "$build/bin/streamrace-replay-gpu" gpu-carry/bin/
cp "$build/lib/libstreamrace.so" gpu-carry/lib/
cp "$build/bin/streamrace-launch-replay" "$build/lib/libstreamrace_bench_launch_replay.so" gpu-carry/bench/
[ -f "$build/lib/streamrace_precise_patches.fatbin" ] && cp "$build/lib/streamrace_precise_patches.fatbin" gpu-carry/lib/
git rev-parse --short HEAD > gpu-carry/COMMIT
git diff --quiet HEAD || echo "dirty" >> gpu-carry/COMMIT
ls -l gpu-carry/bin gpu-carry/lib
