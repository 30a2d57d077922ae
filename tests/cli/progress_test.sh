#!/usr/bin/env bash
# Long work shows progress on stderr (report/progress_meter.h): with --progress from the first
# step as plain lines when stderr is no terminal; on a terminal after a second, redrawn in
# place; without either, nothing. stdout is the same with or without it.
#   progress_test.sh STREAMRACE SOURCE_DIR
set -u
sr=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
rec="$src/samples/traces/deepspeed-0.14.2"  # 2 findings, 558 occurrences: up to 559 fix rounds
check() {  # name want got
  if [ "$2" == "$3" ]; then echo "ok   $1"; else printf 'FAIL %s\n  want: %s\n  got:  %s\n' "$1" "$2" "$3"; fail=1; fi
}
all_match() {  # name regex file
  if [ -s "$3" ] && ! grep -qvE "$2" "$3"; then echo "ok   $1"; else echo "FAIL $1: lines not matching $2:"; cat "$3"; fail=1; fi
}

# replay trace --apply-fix: the rounds, one occurrence per round so that there are several
# (capped at 3 here to keep the test short).
"$sr" replay trace "$rec" --apply-fix all --one-occurrence-per-round --max-rounds 3 --no-simulate -o "$tmp/f1" --progress >"$tmp/o1" 2>"$tmp/e1"
check "replay trace --progress: exit 1 (the cap)" 1 $?
check "replay trace --progress: the first line at once" \
  "streamrace: applying fixes   0% (round 0, 558 of 558 occurrences left)" "$(head -1 "$tmp/e1")"
all_match "replay trace --progress: every line a round" \
  '^streamrace: applying fixes +[0-9]+% \(round [0-9]+, [0-9]+ of 558 occurrences left\)$' "$tmp/e1"
"$sr" replay trace "$rec" --apply-fix all --one-occurrence-per-round --max-rounds 3 --no-simulate -o "$tmp/f1" >"$tmp/o2" 2>"$tmp/e2"
check "replay trace without --progress, no terminal: stderr empty" "" "$(cat "$tmp/e2")"
check "replay trace: stdout the same with --progress" "" "$(diff "$tmp/o1" "$tmp/o2")"
"$sr" replay trace "$src/tests/data/gpu/two_streams_racy" --apply-fix all -o "$tmp/f3" --progress >/dev/null 2>"$tmp/e3"
check "replay trace --progress: the simulator's traces too" "streamrace: simulating   0% (trace 1 of 1)" \
  "$(grep simulating "$tmp/e3")"

# On a terminal (script(1) gives the command one and keeps what it drew in a typescript):
# after a second, redrawn in place, cleared at the end. 120 rounds take more than a second (2.6 s here).
if command -v script >/dev/null; then
  script -qec "'$sr' replay trace '$rec' --apply-fix all --one-occurrence-per-round --max-rounds 120 --no-simulate -o '$tmp/f4' >/dev/null" \
    "$tmp/tty" >/dev/null 2>&1
  if grep -qaE $'\rstreamrace: applying fixes +[0-9]+% \\(round [0-9]+, [0-9]+ of 558 occurrences left\\)\x1b\\[K' "$tmp/tty" &&
     grep -qaF $'\x1b[K\r\x1b[K' "$tmp/tty"; then
    echo "ok   replay trace on a terminal: redrawn in place, then cleared"
  else echo "FAIL replay trace on a terminal:"; cat -v "$tmp/tty"; fail=1; fi
fi

"$sr" replay zero --stage 1 --progress >/dev/null 2>"$tmp/z"
check "replay zero --progress" \
  "streamrace: judging variants   0% (variant 1 of 4: none)" "$(head -1 "$tmp/z")"
"$sr" overlap "$src/samples/traces" --progress >/dev/null 2>"$tmp/ov"
check "overlap --progress" "streamrace: reading device timestamps   0% (trace 1 of 4)" "$(head -1 "$tmp/ov")"
"$sr" analyze "$src/samples/traces" --progress >/dev/null 2>"$tmp/an"
all_match "analyze --progress" '^streamrace: analysing +[0-9]+% \([0-9.]+ of 0\.[0-9] MB\)$' "$tmp/an"
"$sr" check "$src/samples/traces" --progress -f json="$tmp/c.json" >/dev/null 2>"$tmp/ck"
grep -E '^streamrace: analysing traces +[0-9]+% \([0-9.]+ of 0\.[0-9] MB\)$' "$tmp/ck" >"$tmp/ck.meter"
check "check --progress" 0 "$([ -s "$tmp/ck.meter" ]; echo $?)"
exit $fail
