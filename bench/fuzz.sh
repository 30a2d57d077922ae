#!/usr/bin/env bash
# Runs the libFuzzer target (tests/fuzz/fuzz_trace.cpp) for longer than the CI smoke run:
#   bench/fuzz.sh [SECONDS (default 1800)] [JOBS (default 1)]
# Builds build-fuzz/ with clang (-fsanitize=fuzzer,address,undefined), replays the committed
# regression inputs, then fuzzes from the seed corpus. New inputs go to build-fuzz/corpus/,
# crashes to build-fuzz/artifacts/. Record what it ran in bench/results/fuzz.md.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
seconds="${1:-1800}"
jobs="${2:-1}"
cxx="$(command -v clang++-14 || command -v clang++)"
cc="$(command -v clang-14 || command -v clang)"
cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" \
  -DSTREAMRACE_FUZZ=ON -DSTREAMRACE_BUILD_TESTS=OFF >/dev/null
cmake --build build-fuzz -j"$(nproc)" --target fuzz_trace
"$cxx" --version | head -1
build-fuzz/bin/fuzz_trace tests/fuzz/regressions/*
mkdir -p build-fuzz/corpus build-fuzz/artifacts
build-fuzz/bin/fuzz_trace -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -jobs="$jobs" -workers="$jobs" \
  -print_final_stats=1 -artifact_prefix=build-fuzz/artifacts/ build-fuzz/corpus tests/fuzz/corpus
