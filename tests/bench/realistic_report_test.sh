#!/usr/bin/env bash
# bench/realistic_overhead.sh REPORT_ONLY on a hand-made raw.tsv (the layout run_one writes:
# round, job, config, status, rc, wall_s, value, trace_bytes, trace_files, info): each in-process
# job's round-by-round table gives the paused blocks' value beside what each configuration
# added, and the per cent zero2_ab reports itself (else added / paused); a job that is not an
# in-process pair, and a skipped run, get no row there.
set -euo pipefail
root=$1
export PYTHON=${2:-python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/logs"
echo "cpu: test" > "$tmp/logs/machine.txt"
t=$'\t'
{
  echo "1${t}zero2_ab${t}streamrace${t}ok${t}0${t}40.4${t}1.892${t}2040117${t}1${t}ab_on_ms 67.521 ab_off_ms 66.311 ab_added_pct 2.82 off_won 9/10"
  echo "1${t}zero2_ab${t}floor_cbids${t}ok${t}0${t}34.8${t}0.118${t}${t}${t}ab_on_ms 69.249 ab_off_ms 69.052 ab_added_pct 0.17 off_won 6/10"
  echo "2${t}zero2_ab${t}floor_cbids${t}skipped${t}${t}${t}${t}${t}${t}deadline: 39s left, a run takes about 38s"
  echo "2${t}zero2_ab${t}streamrace${t}ok${t}0${t}28.1${t}2.057${t}2040117${t}1${t}ab_on_ms 69.811 ab_off_ms 67.291 ab_added_pct 3.04 off_won 10/10"
  echo "1${t}launch_ab${t}baseline${t}ok${t}0${t}9.1${t}0.502${t}1000${t}1${t}ab_on_us 7.654 ab_off_us 7.003 off_won 26/30"
  echo "1${t}launch_ab${t}streamrace${t}ok${t}0${t}9.1${t}0.544${t}1000${t}1${t}ab_on_us 9.126 ab_off_us 8.665 off_won 27/30"
  echo "1${t}zero2${t}streamrace${t}ok${t}0${t}30.0${t}62.5${t}1000${t}1${t}streamrace run: 1 trace"
} > "$tmp/logs/raw.tsv"
REPORT_ONLY="$tmp/logs" OUT="$tmp/out" bash "$root/bench/realistic_overhead.sh" > "$tmp/log" 2>&1 ||
  { cat "$tmp/log"; echo "FAIL: the report-only run failed"; exit 1; }
md="$tmp/out/realistic_overhead.md"
rows=$(grep -E '^\| [0-9]+ \| ' "$md" || true)
expected='| 1 | `streamrace run` (default) | 66.311 ms | 1.892 | +2.82 % |
| 1 | empty CUPTI subscriber, the tracer'"'"'s cbid list | 69.052 ms | 0.118 | +0.17 % |
| 2 | `streamrace run` (default) | 67.291 ms | 2.057 | +3.04 % |
| 1 | `streamrace run` (default) | 8.665 µs | 0.544 | +6.28 % |
| 1 | `streamrace run` with BASELINE_LIB'"'"'s tracer (an earlier build, same settings) | 7.003 µs | 0.502 | +7.17 % |'
if [[ "$rows" != "$expected" ]]; then
  echo "FAIL: the rounds' rows are"; echo "$rows"; echo "expected"; echo "$expected"; exit 1
fi
[[ $(grep -c '^| round | configuration | paused |' "$md") == 2 ]] ||
  { echo "FAIL: expected a round table for each of the two in-process jobs only"; exit 1; }
echo "ok"
