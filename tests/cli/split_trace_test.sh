#!/usr/bin/env bash
# `analyze -j N` on one trace splits it by allocation over N workers (issue #17); the reports
# (JSON, text, SARIF) and the exit status are byte for byte those of `-j 1`. Splitting is
# forced on these small traces with the hidden --split-min-bytes 0. Traces: a generated
# training trace (clean, 2k allocations), generated racy ZeRO-1/2 ranks (many occurrences),
# the bundled samples.
#   split_trace_test.sh STREAMRACE TRACEGEN SOURCE_DIR
set -u
sr=$1 gen=$2 src=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
"$gen" --shape training --events 300000 --allocations 2000 -o "$tmp/training.srace" >/dev/null || { echo "FAIL tracegen training"; exit 1; }
"$gen" --shape zero12 --fix none --steps 300 --rank 0 -o "$tmp/zero12-rank0.srace" >/dev/null || { echo "FAIL tracegen zero12"; exit 1; }
"$gen" --shape zero12 --fix none --steps 300 --rank 1 -o "$tmp/zero12-rank1.srace" >/dev/null || { echo "FAIL tracegen zero12"; exit 1; }
reports() {  # out_prefix jobs trace...
  local out=$1 jobs=$2
  shift 2
  "$sr" analyze -j "$jobs" --split-min-bytes 0 --no-color -f json="$out.json" -f text="$out.txt" -f sarif="$out.sarif" \
    "$@" >/dev/null 2>"$out.err"
  echo $? >"$out.rc"
}
check() {  # name trace...
  local name=$1
  shift
  local n=$#
  reports "$tmp/one" 1 "$@"
  for w in 2 3 7; do
    reports "$tmp/split" $((n * w)) "$@"
    for ext in json txt sarif rc; do
      if ! cmp -s "$tmp/one.$ext" "$tmp/split.$ext"; then
        echo "FAIL $name, $w workers per trace: the $ext report differs from -j 1"
        diff "$tmp/one.$ext" "$tmp/split.$ext" | head -20
        fail=1
        continue 2
      fi
    done
    echo "ok   $name, $w workers per trace (exit $(cat "$tmp/one.rc"))"
  done
}
check "generated training trace" "$tmp/training.srace"
check "generated racy zero12 rank 0" "$tmp/zero12-rank0.srace"
check "generated racy zero12 ranks 0 and 1 together" "$tmp/zero12-rank0.srace" "$tmp/zero12-rank1.srace"
for t in "$src"/samples/traces/*/*.srace; do check "${t#"$src"/}" "$t"; done
# Without the hidden option a small trace is never split; -j still gives the same report.
"$sr" analyze -j 4 -f json="$tmp/default.json" "$tmp/zero12-rank0.srace" >/dev/null 2>&1
"$sr" analyze -j 1 -f json="$tmp/one.json" "$tmp/zero12-rank0.srace" >/dev/null 2>&1
cmp -s "$tmp/default.json" "$tmp/one.json" && echo "ok   -j 4 below the threshold" || { echo "FAIL -j 4 below the threshold"; fail=1; }
exit $fail
