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

# The fuzz smoke run (where clang is here): the fuzzer built with -fsanitize=fuzzer,address,
# undefined, the committed regression inputs replayed, then 60 s of fuzzing from the seed
# corpus (bench/fuzz.sh runs longer). STREAMRACE_NO_FUZZ=1 skips it.
cd "$root"
if [ -z "${STREAMRACE_NO_FUZZ:-}" ] && { command -v clang++-14 || command -v clang++; } >/dev/null; then
  cxx="$(command -v clang++-14 || command -v clang++)"
  cc="$(command -v clang-14 || command -v clang)"
  cmake -S . -B "$build-fuzz" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" \
    -DSTREAMRACE_FUZZ=ON -DSTREAMRACE_BUILD_TESTS=OFF >/dev/null
  cmake --build "$build-fuzz" -j"$jobs" --target fuzz_trace
  "$build-fuzz/bin/fuzz_trace" tests/fuzz/regressions/*
  fuzz_corpus="$(mktemp -d)"
  trap 'rm -rf "$fuzz_corpus"' EXIT
  "$build-fuzz/bin/fuzz_trace" -max_total_time=60 -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$build-fuzz/" "$fuzz_corpus" tests/fuzz/corpus
fi

# The whole suite once more under ASan+UBSan (-DSTREAMRACE_SANITIZE=ON; the tracer is left out
# of that build). Opt-in with STREAMRACE_ASAN=1: it doubles the build time; its last result is
# in bench/results/fuzz.md.
if [ -n "${STREAMRACE_ASAN:-}" ]; then
  cmake -S . -B "$build-asan" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTREAMRACE_BUILD_TESTS=ON -DSTREAMRACE_TEST_AREAS= \
    -DSTREAMRACE_SANITIZE=ON >/dev/null
  cmake --build "$build-asan" -j"$jobs"
  (cd "$build-asan" && UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j"$jobs" --timeout 600)
fi
