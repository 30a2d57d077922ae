#!/usr/bin/env bash
# Installs what the build needs, builds everything (the tracer too where the CUDA toolkit is
# present) and runs the whole test suite with ctest. No GPU needed.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
scripts/install_deps.sh
build="${STREAMRACE_BUILD_DIR:-build}"
jobs="$(nproc)"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTREAMRACE_BUILD_TESTS=ON -DSTREAMRACE_TEST_AREAS=
cmake --build "$build" -j"$jobs"
cd "$build"
ctest --output-on-failure -j"$jobs" --timeout 300
