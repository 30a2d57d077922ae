#!/usr/bin/env bash
# `streamrace run` and device timestamps: off unless asked (they cost about half of the
# tracer's overhead on a real training step, bench/results/realistic_overhead.md); --timing
# turns them on for the traced command (STREAMRACE_TIMING=1, read by libstreamrace.so).
#   run_timing_test.sh STREAMRACE LIBSTREAMRACE
set -u
sr=$1 lib=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
probe='echo "timing=${STREAMRACE_TIMING-unset}"'
out=$(env -u STREAMRACE_TIMING STREAMRACE_LIB="$lib" "$sr" run --no-color -o "$tmp/a" -- sh -c "$probe" 2>"$tmp/e1")
rc=$?
if [ "$rc" = 0 ] && [ "$out" = "timing=unset" ]; then echo "ok   default: no timestamps"; else
  echo "FAIL default: exit $rc, printed '$out'"; cat "$tmp/e1"; fail=1; fi
out=$(env -u STREAMRACE_TIMING STREAMRACE_LIB="$lib" "$sr" run --no-color --timing -o "$tmp/b" -- sh -c "$probe" 2>"$tmp/e2")
rc=$?
if [ "$rc" = 0 ] && [ "$out" = "timing=1" ]; then echo "ok   --timing: STREAMRACE_TIMING=1"; else
  echo "FAIL --timing: exit $rc, printed '$out'"; cat "$tmp/e2"; fail=1; fi
if "$sr" run --help | grep -q -- "--timing"; then echo "ok   run --help lists --timing"; else
  echo "FAIL run --help lacks --timing"; fail=1; fi
exit $fail
