#!/usr/bin/env bash
# scripts/gpu/compare_fixtures.py, the check that re-recorded GPU fixtures give the committed
# findings: committed cases against themselves are SAME (exit 0); a racy case whose traces are
# its clean twin's, and a case with no traces, are DIFFERENT (exit 1); a missing tarball is
# bad input (exit 2).   compare_fixtures_test.sh STREAMRACE REPO
set -u
sr=$1 repo=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
pack() {  # NAME: tarball of $tmp/NAME/traces/<case>/*.srace
  tar czf "$tmp/$1.tar.gz" -C "$tmp/$1" traces
}
mkdir -p "$tmp/self/traces" "$tmp/swap/traces"
for c in two_streams_racy two_streams_clean kernel_args_racy; do
  mkdir -p "$tmp/self/traces/$c" "$tmp/swap/traces/$c"
  cp "$repo/tests/data/gpu/$c"/*.srace "$tmp/self/traces/$c/"
done
pack self
out=$(python3 "$repo/scripts/gpu/compare_fixtures.py" "$tmp/self.tar.gz" "$sr" 2>&1); rc=$?
[ $rc = 0 ] || fail "self comparison exited $rc: $out"
[ "$(grep -c '^SAME ' <<<"$out")" = 3 ] || fail "expected 3 SAME: $out"
grep -q '^total: 3 SAME, 0 DIFFERENT' <<<"$out" || fail "no total line: $out"
cp "$repo/tests/data/gpu/two_streams_clean"/*.srace "$tmp/swap/traces/two_streams_racy/"
cp "$repo/tests/data/gpu/two_streams_clean"/*.srace "$tmp/swap/traces/two_streams_clean/"
pack swap  # kernel_args_racy left empty
out=$(python3 "$repo/scripts/gpu/compare_fixtures.py" "$tmp/swap.tar.gz" "$sr" 2>&1); rc=$?
[ $rc = 1 ] || fail "swapped comparison exited $rc: $out"
grep -q '^DIFFERENT two_streams_racy' <<<"$out" || fail "the swapped racy case is not DIFFERENT: $out"
grep -q '^SAME *two_streams_clean' <<<"$out" || fail "the clean case is not SAME: $out"
grep -q '^DIFFERENT kernel_args_racy' <<<"$out" || fail "the empty case is not DIFFERENT: $out"
python3 "$repo/scripts/gpu/compare_fixtures.py" "$tmp/none.tar.gz" "$sr" > /dev/null 2>&1; rc=$?
[ $rc = 2 ] || fail "a missing tarball exited $rc, not 2"
echo "compare_fixtures: ok"
