#!/usr/bin/env bash
# One meaning per short flag across the subcommands (-o: where the main output goes, -f: the
# format, -j: jobs), the new spellings next to the old ones (replay trace --out, explain
# --json), and --error-exitcode on every gating command.
#   option_spelling_test.sh STREAMRACE SOURCE_DIR
set -u
sr=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
racy="$src/tests/data/gpu/two_streams_racy"
check() {  # name want got
  if [ "$2" == "$3" ]; then echo "ok   $1"; else printf 'FAIL %s\n  want: %s\n  got:  %s\n' "$1" "$2" "$3"; fail=1; fi
}

# Every short flag in every subcommand's --help, with the long name it stands for.
for cmd in run analyze check explain overlap "replay zero" "replay trace"; do
  $sr $cmd --help | grep -oE '^ +-[a-z],--[a-z-]+' | grep -v -- '-h,--help' | sed "s/^ */$cmd: /"
done >"$tmp/shorts"
check "short flags" "run: -o,--output-dir
analyze: -f,--format
analyze: -o,--output
analyze: -j,--jobs
check: -f,--format
check: -o,--output
check: -j,--jobs
explain: -f,--format
overlap: -f,--format
replay zero: -f,--format
replay trace: -o,--output-dir
replay trace: -f,--format" "$(cat "$tmp/shorts")"

# replay trace: -o DIR, --output-dir DIR and the old --out DIR write the same place.
for spelling in -o --output-dir --out; do
  "$sr" replay trace "$racy" --apply-fix all --no-simulate $spelling "$tmp/fixed$spelling" >"$tmp/r" 2>&1
  check "replay trace $spelling DIR" "0 edited traces in $tmp/fixed$spelling 1" \
    "$? $(grep '^edited traces in' "$tmp/r") $(ls "$tmp/fixed$spelling" | grep -c '\.fixed\.srace$')"
done

# explain: --format json is --json; -f text the default.
fp=$("$sr" analyze "$racy" -f json | sed -n 's/^ *"fingerprint": "\([0-9a-f]*\)".*/\1/p' | head -1)
"$sr" explain "$fp" "$racy" --json >"$tmp/j1"
"$sr" explain "$fp" "$racy" -f json >"$tmp/j2"
check "explain -f json is --json" "0 $(head -c1 "$tmp/j1")" "$(cmp -s "$tmp/j1" "$tmp/j2"; echo $?) {"
"$sr" explain "$fp" "$racy" >"$tmp/t1"
"$sr" explain "$fp" "$racy" --format text >"$tmp/t2"
check "explain --format text is the default" 0 "$(cmp -s "$tmp/t1" "$tmp/t2"; echo $?)"
"$sr" explain "$fp" "$racy" -f xml >/dev/null 2>"$tmp/e"
check "explain -f xml: exit 2" "2 streamrace explain: unknown format 'xml' (text or json)" "$? $(cat "$tmp/e")"
"$sr" overlap "$src/samples/traces" -f json >"$tmp/o1"
"$sr" overlap "$src/samples/traces" --format json >"$tmp/o2"
check "overlap -f json is --format json" 0 "$(cmp -s "$tmp/o1" "$tmp/o2"; echo $?)"

# --error-exitcode on every gating command.
"$sr" analyze "$racy" --error-exitcode 5 >/dev/null 2>&1
check "analyze --error-exitcode 5" 5 $?
"$sr" check "$racy" --error-exitcode 6 >/dev/null 2>&1
check "check --error-exitcode 6" 6 $?
"$sr" replay zero --stage 1 --fix none --error-exitcode 7 >/dev/null 2>&1
check "replay zero --error-exitcode 7 (the racy variant)" 7 $?
"$sr" replay zero --stage 1 --fix event --error-exitcode 7 >/dev/null 2>&1
check "replay zero --error-exitcode 7 (a clean variant)" 0 $?
"$sr" replay trace "$racy" --apply-fix all --max-rounds 0 --no-simulate -o "$tmp/x" --error-exitcode 8 >/dev/null 2>&1
check "replay trace --error-exitcode 8 (fixed)" 0 $?
for cmd in run analyze check "replay zero" "replay trace"; do
  $sr $cmd --help | grep -q -- '--error-exitcode' && echo "ok   $cmd --help: --error-exitcode" ||
    { echo "FAIL $cmd --help lacks --error-exitcode"; fail=1; }
done
exit $fail
