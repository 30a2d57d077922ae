#!/usr/bin/env bash
# Runs the cases (program + expected report, see tests/README.md) with the case runner; with
# --update, rewrites each case's expected report from what the analyzer gives now instead of
# comparing. Review `git diff` before committing what it wrote.
#
#   tests/update_expected.sh [--update] [--build DIR] [FILTER]
#
# FILTER is a gtest filter on the case names (e.g. '*rules_event_wait*', '*gpu_*'); DIR is the
# build directory (default: build). A case without an expected file yet gets one with --update.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$root/build"
update=0
filter='*'
while [ $# -gt 0 ]; do
  case "$1" in
    --update) update=1 ;;
    --build) build="$2"; shift ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) filter="$1" ;;
  esac
  shift
done
cmake --build "$build" --target case_tests >/dev/null
if [ "$update" = 1 ]; then
  STREAMRACE_UPDATE_EXPECTED=1 "$build/bin/case_tests" --gtest_filter="Cases/CaseTest.Report/$filter" | grep '^updated' || true
  echo "review: git -C \"$root\" diff --stat -- tests"
else
  "$build/bin/case_tests" --gtest_filter="Cases/CaseTest.Report/$filter"
fi
