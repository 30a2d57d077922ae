#!/usr/bin/env bash
# `replay trace --apply-fix all` says what is true of its input: "fixed" only when there was
# a finding to fix and it is gone; a clean input is "nothing to fix" (exit 0), never "fixed".
#   replay_verdict_test.sh STREAMRACE GPU_DATA_DIR
set -u
sr=$1 data=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
check() {  # name want_rc want_line rc out_file
  if [ "$4" != "$2" ]; then echo "FAIL $1: exit $4, want $2"; cat "$5"; fail=1; return; fi
  if ! grep -qxF -- "$3" "$5"; then echo "FAIL $1: no line '$3'"; cat "$5"; fail=1; return; fi
  echo "ok   $1"
}
"$sr" replay trace "$data/two_streams_clean" --apply-fix all --out "$tmp/clean" >"$tmp/o1" 2>&1
check "clean input" 0 "verdict: nothing to fix (the input has no findings)" $? "$tmp/o1"
"$sr" replay trace "$data/two_streams_racy" --apply-fix all --out "$tmp/racy" >"$tmp/o2" 2>&1
check "racy input" 0 "verdict: fixed" $? "$tmp/o2"
"$sr" replay trace "$data/two_streams_clean" --apply-fix all --out "$tmp/clean_json" --format json >"$tmp/o3" 2>&1
check "clean input, JSON" 0 '  "verdict": "nothing to fix",' $? "$tmp/o3"
grep -qxF '  "fixed": false,' "$tmp/o3" && echo "ok   clean input, JSON: fixed false" || { echo "FAIL clean JSON fixed"; cat "$tmp/o3"; fail=1; }
exit $fail
