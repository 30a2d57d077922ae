#!/usr/bin/env bash
# `replay trace --apply-fix all` on traces too large to lift for the simulator (two generated
# ZeRO-1/2 ranks, 4000 steps, about 280k records each): the simulator's opinion is refused by
# record count before any lift, with the count; the edits and the verdict are those of
# --no-simulate; the edited traces analyse clean. Per rank and step 12 racing call pairs between
# 2 stream pairs: a record after the all-reduce and after the copy-back, a wait before the
# step's first copy-in for each (the later copy-ins' waits would join the same records): 4
# edits per step, 16000 per rank, of 2 fix events (the edited trace: 280095 records + 16000 +
# 2 EventCreates + 3 API names).
#   apply_fix_large_trace_test.sh STREAMRACE TRACEGEN
set -u
sr=$1 gen=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
check() {  # name want got
  if [ "$2" == "$3" ]; then echo "ok   $1"; else echo "FAIL $1:"; echo "  want: $2"; echo "  got:  $3"; fail=1; fi
}
mkdir "$tmp/in"
for r in 0 1; do
  "$gen" --shape zero12 --fix none --steps 4000 --rank $r -o "$tmp/in/rank$r.srace" >/dev/null || exit 1
done
"$sr" replay trace "$tmp/in" --apply-fix all -o "$tmp/fixed" >"$tmp/o1" 2>"$tmp/e1"
check "simulator's opinion on: exit 0" 0 $?
check "simulator's opinion on: the report" "streamrace replay: 2 trace(s), 2 finding(s) before, 2 targeted
trace        edits  simulator before                                                      simulator after
--------------------------------------------------------------------------------------------------------------------------------------------------------------
rank0.srace  16000  not simulated (280095 records, more than the 250000 a lift may hold)  not simulated (296100 records, more than the 250000 a lift may hold)
rank1.srace  16000  not simulated (280095 records, more than the 250000 a lift may hold)  not simulated (296100 records, more than the 250000 a lift may hold)
record-level edits: 32000 in 1 round(s) (16000 records and 16000 waits of 4 fix events)
analyzer after the edits: 0 finding(s); removed 2, remaining 0, new 0
edited traces in TMP/fixed
verdict: fixed" "$(sed "s|$tmp|TMP|g" "$tmp/o1")"
check "simulator's opinion on: stderr empty" "" "$(cat "$tmp/e1")"
"$sr" replay trace "$tmp/in" --apply-fix all --no-simulate -o "$tmp/plain" >"$tmp/o2" 2>&1
check "--no-simulate: exit 0" 0 $?
check "--no-simulate: the same edits and verdict" "streamrace replay: 2 trace(s), 2 finding(s) before, 2 targeted
trace        edits
------------------
rank0.srace  16000
rank1.srace  16000
record-level edits: 32000 in 1 round(s) (16000 records and 16000 waits of 4 fix events)
analyzer after the edits: 0 finding(s); removed 2, remaining 0, new 0
edited traces in TMP/plain
verdict: fixed" "$(sed "s|$tmp|TMP|g" "$tmp/o2")"
check "the same edited traces" "$(cd "$tmp/fixed" && cksum rank0.fixed.srace rank1.fixed.srace)" \
  "$(cd "$tmp/plain" && cksum rank0.fixed.srace rank1.fixed.srace)"
"$sr" analyze "$tmp/fixed" >"$tmp/a1" 2>&1
check "the edited traces analyse clean: exit 0" 0 $?
check "the edited traces analyse clean: summary" "SUMMARY: streamrace: 0 races (0 certain, 0 possible) in 2 traces" \
  "$(tail -1 "$tmp/a1")"
exit $fail
