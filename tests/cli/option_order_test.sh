#!/usr/bin/env bash
# Options before and after the paths, as CI lines get written: a repeatable option
# (--format, --suppressions) takes one value and never swallows the positional after it; -j
# gives the same report as one trace after another.
#   option_order_test.sh STREAMRACE TRACE_DIR
set -u
sr=$1 traces=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
expect() {  # name want_rc rc file_that_must_exist
  if [ "$3" != "$2" ]; then echo "FAIL $1: exit $3, want $2"; cat "$tmp/err"; fail=1; return; fi
  if [ -n "${4:-}" ] && [ ! -s "$4" ]; then echo "FAIL $1: $4 not written"; fail=1; return; fi
  echo "ok   $1"
}
"$sr" analyze -f json=$tmp/a.json "$traces" --no-color >/dev/null 2>"$tmp/err"
expect "analyze -f NAME=FILE TRACES --no-color" 1 $? "$tmp/a.json"
"$sr" analyze --no-color "$traces" -f json=$tmp/b.json -f sarif=$tmp/b.sarif >/dev/null 2>"$tmp/err"
expect "analyze TRACES -f ... -f ..." 1 $? "$tmp/b.sarif"
cmp -s "$tmp/a.json" "$tmp/b.json" && echo "ok   same report either order" || { echo "FAIL reports differ by option order"; fail=1; }
echo '{"schema":"streamrace-baseline","version":1,"findings":[]}' > "$tmp/base.json"
"$sr" check -f sarif=$tmp/c.sarif "$traces" --baseline "$tmp/base.json" --no-color >/dev/null 2>"$tmp/err"
expect "check -f NAME=FILE TRACES --baseline B" 1 $? "$tmp/c.sarif"
: > "$tmp/empty.supp"
"$sr" check --suppressions "$tmp/empty.supp" "$traces" --no-color >/dev/null 2>"$tmp/err"
expect "check --suppressions FILE TRACES" 1 $?
"$sr" check "$traces" --error-exitcode 7 --no-color >/dev/null 2>"$tmp/err"
expect "check --error-exitcode 7 (new findings)" 7 $?
"$sr" analyze -j 1 -f json=$tmp/j1.json "$traces" >/dev/null 2>"$tmp/err"
expect "analyze -j 1" 1 $? "$tmp/j1.json"
"$sr" analyze "$traces" -j 3 -f json=$tmp/j3.json >/dev/null 2>"$tmp/err"
expect "analyze -j 3" 1 $? "$tmp/j3.json"
cmp -s "$tmp/j1.json" "$tmp/j3.json" && echo "ok   -j 1 and -j 3 give the same report" || { echo "FAIL -j changes the report"; fail=1; }
"$sr" analyze "$traces" --max-frames 1 --no-color >"$tmp/mf" 2>"$tmp/err"
expect "analyze --max-frames 1" 1 $?
if grep -q '^    #1 ' "$tmp/mf" || ! grep -q '^    #0 ' "$tmp/mf" || ! grep -q '^    \.\.\. [0-9]* more frames$' "$tmp/mf"; then
  echo "FAIL --max-frames 1 shows other than one frame per stack"; fail=1
else echo "ok   --max-frames 1: one frame per stack, the rest counted"; fi
exit $fail
