#!/usr/bin/env bash
# After a tracer change, in ONE device call (one GPU): what issue 12 asks of every change.
#   1. every single-GPU fixture re-recorded with the carried tracer (rerecord_batch.sh),
#   2. the launch loop, callbacks on/off inside one process (launch_ab): the carried tracer
#      against BASELINE_LIB's, interleaved rounds,
#   3. GPT-2 ZeRO-2 the same way (zero2_ab),
#   4. ZeRO-2 once more with the tracer timing its own parts (selftime): where the time goes.
# Each step under its own deadline; what does not fit is skipped by the step's script and named
# in its results. Carry ["gpu-carry", ".whl"]; BASELINE_LIB defaults to
# gpu-carry/baseline/libstreamrace.so (the library of the commit before the change).
#
#   bash scripts/gpu/tracer_change_batch.sh          # repo root, on the GPU machine, timeout 600
#
# Env: OUT (default /tmp/tracer_change), PIN (default 2-9: taskset for the overhead runs),
# RR_S (180), LAUNCH_ROUNDS (5), ZERO2_ROUNDS (2), LAUNCH_CONFIGS and ZERO2_CONFIGS ("streamrace
# baseline"; add floor_cbids for CUPTI's own cost in the same rounds), LAUNCH_S (120), ZERO2_S (200),
# SKIP (a regex of steps to skip: rerecord, launch, zero2, selftime), LAUNCH_JOBS ("launch_ab
# native_ab": the Python loop and the C++ loop of empty launches with native stacks, whose
# 20-fold regression went unseen from session 28 to 40 while only the Python loop ran), SELFTIME_CONFIGS ("selftime"; "selftime baseline_selftime" compares the
# two builds part by part in one run), SELFTIME_JOB (zero2_ab; launch_ab for the loop's parts),
# SELFTIME_ROUNDS (1), SELFTIME_S (its deadline, 70).
# Results (at most 5 files: the device call brings back 8 at most):
# $OUT/rr/rerecord.tar.gz, $OUT/{launch,zero2,selftime}/realistic_overhead.md, and
# $OUT/results.tar.gz with everything else (the steps' logs, .json, the rerecord summary).
# Then, on the CPU machine: python3 scripts/gpu/compare_fixtures.py <rr/rerecord.tar.gz> build/bin/streamrace
set -u
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$REPO" || exit 2
OUT=${OUT:-/tmp/tracer_change}
export PIN=${PIN:-2-9}
BASELINE_LIB=${BASELINE_LIB:-$REPO/gpu-carry/baseline/libstreamrace.so}
SKIP=${SKIP:-^$}
mkdir -p "$OUT"
t0=$(date +%s)
step() { [[ "$1" =~ $SKIP ]] && { echo "== $1 skipped (SKIP)"; return 1; }; echo "== $1 at $(( $(date +%s) - t0 )) s"; }
if step rerecord; then
  OUT=$OUT/rr DEADLINE_S=${RR_S:-180} bash scripts/gpu/rerecord_batch.sh >"$OUT/rerecord.log" 2>&1
  tail -3 "$OUT/rerecord.log"
fi
overhead() {  # name job configs rounds deadline
  OUT=$OUT/$1 JOBS=$2 CONFIGS=$3 ROUNDS=$4 DEADLINE_S=$5 RUN_TIMEOUT_S=120 BASELINE_LIB=$BASELINE_LIB \
    bash bench/realistic_overhead.sh >"$OUT/$1.log" 2>&1
  tail -2 "$OUT/$1.log"
}
if [[ ! -f "$BASELINE_LIB" ]]; then echo "no BASELINE_LIB ($BASELINE_LIB): the A/B steps run the carried tracer alone"; fi
step launch && overhead launch "${LAUNCH_JOBS:-launch_ab native_ab}" "${LAUNCH_CONFIGS:-streamrace baseline}" "${LAUNCH_ROUNDS:-5}" "${LAUNCH_S:-120}"
step zero2 && overhead zero2 zero2_ab "${ZERO2_CONFIGS:-streamrace baseline}" "${ZERO2_ROUNDS:-2}" "${ZERO2_S:-200}"
step selftime && overhead selftime "${SELFTIME_JOB:-zero2_ab}" "${SELFTIME_CONFIGS:-selftime}" "${SELFTIME_ROUNDS:-1}" "${SELFTIME_S:-70}"
echo "== done at $(( $(date +%s) - t0 )) s"
# The device call brings back at most 8 files: everything but the re-recorded traces and the
# three summaries goes into one archive.
(cd "$OUT" && tar czf results.tar.gz --exclude=results.tar.gz --exclude=rr/rerecord.tar.gz ./* 2>/dev/null)
find "$OUT" -type f ! -name results.tar.gz ! -name rerecord.tar.gz ! -name realistic_overhead.md -delete
find "$OUT" -type f | sed "s|^$OUT/|kept: |"
