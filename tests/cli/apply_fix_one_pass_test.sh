#!/usr/bin/env bash
# `replay trace --apply-fix all` on the bundled DeepSpeed recording (2 findings, 558
# occurrences, 278 and 280 racing call pairs per trace, all between the same two streams):
# every occurrence edited in one round with one fix event per trace, the same verdict as the
# former one-occurrence-per-round method (280 rounds), and edited traces that analyse clean;
# --one-occurrence-per-round still stops at its round cap. Consecutive pairs overlap (the next
# pair's earlier call comes before this pair's later call: (702,719), (718,735), ...), so the
# record after the next earlier call replaces the one before it ahead of the wait, and that
# wait orders the next later call too: about a record and a wait per two racing pairs, 140 of
# each per trace (280 edits).
#   apply_fix_one_pass_test.sh STREAMRACE TRACE_DIR
set -u
sr=$1 rec=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
check() {  # name want got
  if [ "$2" == "$3" ]; then echo "ok   $1"; else echo "FAIL $1:"; echo "  want: $2"; echo "  got:  $3"; fail=1; fi
}
"$sr" replay trace "$rec" --apply-fix all -o "$tmp/fixed" >"$tmp/o1" 2>"$tmp/e1"
check "one pass: exit 0" 0 $?
check "one pass: the report" "streamrace replay: 2 trace(s), 2 finding(s) before, 2 targeted
trace          edits  simulator before                  simulator after
----------------------------------------------------------------------------------------
vm-1230.srace  280    not simulated (1002438745 cells)  not simulated (1002438745 cells)
vm-1231.srace  280    not simulated (1002438745 cells)  not simulated (1002438745 cells)
record-level edits: 560 in 1 round(s) (280 records and 280 waits of 2 fix events)
analyzer after the edits: 0 finding(s); removed 2, remaining 0, new 0
edited traces in $tmp/fixed
verdict: fixed" "$(cat "$tmp/o1")"
check "one pass: stderr empty" "" "$(cat "$tmp/e1")"
check "one pass: only the final traces stay" "vm-1230.fixed.srace vm-1231.fixed.srace" "$(ls "$tmp/fixed" | tr '\n' ' ' | sed 's/ $//')"
"$sr" analyze "$tmp/fixed" >"$tmp/a1" 2>&1
check "the edited traces analyse clean: exit 0" 0 $?
check "the edited traces analyse clean: summary" "SUMMARY: streamrace: 0 races (0 certain, 0 possible) in 2 traces" \
  "$(tail -1 "$tmp/a1")"
"$sr" replay trace "$rec" --apply-fix 736476b4ff4c71e1 --no-simulate -f json -o "$tmp/one" >"$tmp/j1" 2>&1
check "one fingerprint, JSON: exit 0" 0 $?
# One finding (120 and 160 pairs): one event per trace, 60 and 80 records and waits.
check "one fingerprint, JSON: rounds, edits, events, records, waits, removed, new, verdict, findings after" \
  '1 [[120,1,60,60],[160,1,80,80]] ["736476b4ff4c71e1"] [] fixed 1' \
  "$(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(j["rounds"], json.dumps([[t["edits"], t["events"], t["records"], t["waits"]] for t in j["traces"]], separators=(",",":")), json.dumps(j["removed"]), json.dumps(j["introduced"]), j["verdict"], j["findings_after"])' "$tmp/j1")"
"$sr" replay trace "$rec" --apply-fix all --one-occurrence-per-round --max-rounds 5 --no-simulate -o "$tmp/slow" \
  >"$tmp/o2" 2>&1
check "one occurrence per round, capped at 5: exit 1" 1 $?
# Both findings' first occurrences per round: a record and a wait each, of the round's event.
check "one occurrence per round, capped at 5: edits" \
  "record-level edits: 20 in 5 round(s) (10 records and 10 waits of 5 fix events) (stopped at the cap of 5 rounds)" \
  "$(grep '^record-level edits' "$tmp/o2")"
exit $fail
