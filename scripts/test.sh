#!/usr/bin/env bash
# Installs what the build needs, builds everything (the tracer too where the CUDA toolkit is
# present) and runs the whole test suite with ctest. No GPU needed.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
scripts/install_deps.sh
build="${STREAMRACE_BUILD_DIR:-build}"
jobs="$(nproc)"
# Precise mode is built (and its tests run) when nvcc is here and the Compute Sanitizer API
# headers can be had: the toolkit's compute-sanitizer/ or, failing that, the
# nvidia-cuda-sanitizer-api wheel (scripts/fetch_sanitizer_api.sh). STREAMRACE_NO_PRECISE=1 skips it.
precise=(-DSTREAMRACE_BUILD_PRECISE=OFF)
if [ -z "${STREAMRACE_NO_PRECISE:-}" ] && [ -x /usr/local/cuda/bin/nvcc ]; then
  if [ -f /usr/local/cuda/compute-sanitizer/include/sanitizer_patching.h ]; then
    precise=(-DSTREAMRACE_BUILD_PRECISE=ON -DSTREAMRACE_SANITIZER_ROOT=/usr/local/cuda/compute-sanitizer)
  elif sanitizer_root=$(scripts/fetch_sanitizer_api.sh "$(realpath -m "$build")/_sanitizer_api"); then
    precise=(-DSTREAMRACE_BUILD_PRECISE=ON "-DSTREAMRACE_SANITIZER_ROOT=$sanitizer_root")
  else
    echo "streamrace: building without precise mode (no Compute Sanitizer API headers)" >&2
  fi
fi
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTREAMRACE_BUILD_TESTS=ON -DSTREAMRACE_TEST_AREAS= \
  "${precise[@]}"
cmake --build "$build" -j"$jobs"
cd "$build"
ctest --output-on-failure -j"$jobs" --timeout 300
