#!/usr/bin/env bash
# The text report's closing SUMMARY line (report/closing_summary.h) and --print-limit, on
# analyze, check and run: the exact line, always last, counting every finding whatever
# --print-limit left out; never in JSON on stdout.
#   text_summary_test.sh STREAMRACE SOURCE_DIR
set -u
sr=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
traces="$src/samples/traces"  # two recordings, 4 races in 4 traces
gpu="$src/tests/data/gpu"
check() {  # name want got
  if [ "$2" == "$3" ]; then echo "ok   $1"; else printf 'FAIL %s\n  want: %s\n  got:  %s\n' "$1" "$2" "$3"; fail=1; fi
}
all4="SUMMARY: streamrace: 4 races (4 certain, 0 possible) in 4 traces"

"$sr" analyze --no-color "$traces" >"$tmp/a" 2>/dev/null
check "analyze: exit 1, SUMMARY last" "1 $all4" "$? $(tail -1 "$tmp/a")"
check "analyze: every finding by default (limit 100)" 4 "$(grep -c '^WARNING: streamrace: ' "$tmp/a")"
"$sr" analyze --no-color "$traces" --print-limit 1 >"$tmp/b" 2>/dev/null
check "analyze --print-limit 1: one finding printed" 1 "$(grep -c '^WARNING: streamrace: ' "$tmp/b")"
check "analyze --print-limit 1: the rest counted" "streamrace: 3 more races not shown (--print-limit 1; 0 shows all)" \
  "$(grep ' more race' "$tmp/b")"
check "analyze --print-limit 1: SUMMARY counts them all" "$all4" "$(tail -1 "$tmp/b")"
"$sr" analyze --no-color "$traces" --print-limit 0 >"$tmp/c" 2>/dev/null
check "analyze --print-limit 0: all" 4 "$(grep -c '^WARNING: streamrace: ' "$tmp/c")"
"$sr" analyze --no-color "$gpu/two_streams_clean" >"$tmp/d" 2>/dev/null
check "analyze clean: exit 0" "0 SUMMARY: streamrace: 0 races (0 certain, 0 possible) in 1 trace" "$? $(tail -1 "$tmp/d")"
"$sr" analyze --no-color "$gpu/cupti_busy_racy" >"$tmp/e" 2>/dev/null
check "analyze blind trace: exit 2, no verdict" \
  "2 SUMMARY: streamrace: 0 races (0 certain, 0 possible) in 1 trace; no verdict: 1 trace captured no CUDA calls" \
  "$? $(tail -1 "$tmp/e")"
"$sr" analyze "$traces" -o "$tmp/report.txt" >"$tmp/f" 2>/dev/null
check "analyze -o FILE: SUMMARY ends the file" "$all4" "$(tail -1 "$tmp/report.txt")"
"$sr" analyze "$traces" -f json >"$tmp/g" 2>/dev/null
check "analyze -f json: no SUMMARY on stdout" 0 "$(grep -c '^SUMMARY' "$tmp/g")"

"$sr" check --no-color "$traces" --print-limit 1 >"$tmp/h" 2>/dev/null
check "check: exit 1, SUMMARY last" "1 $all4" "$? $(tail -1 "$tmp/h")"
check "check --print-limit 1: one new: line" 1 "$(grep -c '^  new: ' "$tmp/h")"
check "check --print-limit 1: the rest counted" "  3 more new findings not listed (--print-limit 1; 0 lists all)" \
  "$(grep 'more new findings' "$tmp/h")"
"$sr" check "$traces" --baseline "$tmp/base.json" --update-baseline -f json="$tmp/all.json" >/dev/null 2>&1
"$sr" check --no-color "$traces" --baseline "$tmp/base.json" >"$tmp/i" 2>/dev/null
check "check, all baselined: exit 0" "0 SUMMARY: streamrace: 0 races (0 certain, 0 possible) in 4 traces; 4 baselined" \
  "$? $(tail -1 "$tmp/i")"
printf 'race:*\n' >"$tmp/all.supp"
"$sr" check --no-color "$traces" --suppressions "$tmp/all.supp" >"$tmp/j" 2>/dev/null
check "check, all suppressed: exit 0" "0 SUMMARY: streamrace: 0 races (0 certain, 0 possible) in 4 traces; 4 suppressed" \
  "$? $(tail -1 "$tmp/j")"

# run: a "traced" command that writes recorded traces into the run's directory.
if "$sr" run --help >/dev/null 2>&1 && [ -n "${STREAMRACE_LIB:-}" ]; then
  "$sr" run --no-color --print-limit 1 -o "$tmp/run" -- sh -c "cp $src/samples/traces/deepspeed-0.14.2/*.srace \"\$STREAMRACE_OUT\"/" \
    >"$tmp/k" 2>/dev/null
  check "run: exit 1, SUMMARY last" "1 SUMMARY: streamrace: 2 races (2 certain, 0 possible) in 2 traces" "$? $(tail -1 "$tmp/k")"
  check "run --print-limit 1" "streamrace: 1 more race not shown (--print-limit 1; 0 shows all)" "$(grep ' more race' "$tmp/k")"
fi
exit $fail
