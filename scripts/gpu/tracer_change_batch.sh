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
# RR_S (180), LAUNCH_ROUNDS (4), ZERO2_ROUNDS (3), LAUNCH_CONFIGS and ZERO2_CONFIGS ("streamrace
# baseline"; add floor_cbids for CUPTI's own cost in the same rounds), LAUNCH_S and ZERO2_S (the
# steps' deadlines; by default what their rounds need, need_s below: a deadline shorter than that
# skips the last rounds, as runs 74-75 did),
# SKIP (a regex of steps to skip: rerecord, launch, zero2, selftime), LAUNCH_JOBS ("launch_ab
# native_ab": the Python loop and the C++ loop of empty launches with native stacks, whose
# 20-fold regression went unseen from session 28 to 40 while only the Python loop ran), SELFTIME_CONFIGS ("selftime"; "selftime baseline_selftime" compares the
# two builds part by part in one run), SELFTIME_JOB (zero2_ab; launch_ab for the loop's parts),
# SELFTIME_ROUNDS (1), SELFTIME_S (its deadline; by default what it needs). The plan's total is
# printed first, with a warning where it exceeds what one device call may run (600 s).
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
RR_S=${RR_S:-180}
mkdir -p "$OUT"
t0=$(date +%s)
step() { [[ "$1" =~ $SKIP ]] && { echo "== $1 skipped (SKIP)"; return 1; }; echo "== $1 at $(( $(date +%s) - t0 )) s"; }
# Seconds a step needs: realistic_overhead.sh's set-up, each run as that script estimates it
# (1.15 x its wall time + 5 s; the walls of runs 74-78 on H100 hosts: launch_ab 5.5-8.8 s,
# native_ab 4.1-4.7, zero2_ab 24-29) and the 15 s it keeps back for writing its results.
need_s() {  # jobs configs rounds
  local jobs=($1) configs=($2) per=0 setup=15 j
  for j in "${jobs[@]}"; do
    case $j in
      launch_ab) per=$((per + 12)) ;;
      native_ab) per=$((per + 11)); setup=$((setup + 10)) ;;  # nvcc builds the loop first
      zero2_ab) per=$((per + 36)); setup=$((setup + 20)) ;;   # DeepSpeed's wheels unpacked first
      *) per=$((per + 60)) ;;
    esac
  done
  echo $((setup + 15 + $3 * ${#configs[@]} * per))
}
LAUNCH_JOBS=${LAUNCH_JOBS:-launch_ab native_ab}
LAUNCH_CONFIGS=${LAUNCH_CONFIGS:-streamrace baseline}
LAUNCH_ROUNDS=${LAUNCH_ROUNDS:-4}
ZERO2_CONFIGS=${ZERO2_CONFIGS:-streamrace baseline}
ZERO2_ROUNDS=${ZERO2_ROUNDS:-3}
SELFTIME_JOB=${SELFTIME_JOB:-zero2_ab}
SELFTIME_CONFIGS=${SELFTIME_CONFIGS:-selftime}
SELFTIME_ROUNDS=${SELFTIME_ROUNDS:-1}
LAUNCH_S=${LAUNCH_S:-$(need_s "$LAUNCH_JOBS" "$LAUNCH_CONFIGS" "$LAUNCH_ROUNDS")}
ZERO2_S=${ZERO2_S:-$(need_s zero2_ab "$ZERO2_CONFIGS" "$ZERO2_ROUNDS")}
SELFTIME_S=${SELFTIME_S:-$(need_s "$SELFTIME_JOB" "$SELFTIME_CONFIGS" "$SELFTIME_ROUNDS")}
plan=0
for s in rerecord:$RR_S launch:$LAUNCH_S zero2:$ZERO2_S selftime:$SELFTIME_S; do
  [[ "${s%%:*}" =~ $SKIP ]] || plan=$((plan + ${s#*:}))
done
echo "plan: rerecord $RR_S s, launch $LAUNCH_S s, zero2 $ZERO2_S s, selftime $SELFTIME_S s (SKIP '$SKIP'): $plan s"
(( plan <= 600 )) || echo "warning: the plan takes $plan s, more than a device call's 600 s: set SKIP or fewer rounds, or the call's timeout ends it"
if step rerecord; then
  OUT=$OUT/rr DEADLINE_S=$RR_S bash scripts/gpu/rerecord_batch.sh >"$OUT/rerecord.log" 2>&1
  tail -3 "$OUT/rerecord.log"
fi
overhead() {  # name job configs rounds deadline
  OUT=$OUT/$1 JOBS=$2 CONFIGS=$3 ROUNDS=$4 DEADLINE_S=$5 RUN_TIMEOUT_S=120 BASELINE_LIB=$BASELINE_LIB \
    bash bench/realistic_overhead.sh >"$OUT/$1.log" 2>&1
  tail -2 "$OUT/$1.log"
}
if [[ ! -f "$BASELINE_LIB" ]]; then echo "no BASELINE_LIB ($BASELINE_LIB): the A/B steps run the carried tracer alone"; fi
step launch && overhead launch "$LAUNCH_JOBS" "$LAUNCH_CONFIGS" "$LAUNCH_ROUNDS" "$LAUNCH_S"
step zero2 && overhead zero2 zero2_ab "$ZERO2_CONFIGS" "$ZERO2_ROUNDS" "$ZERO2_S"
step selftime && overhead selftime "$SELFTIME_JOB" "$SELFTIME_CONFIGS" "$SELFTIME_ROUNDS" "$SELFTIME_S"
echo "== done at $(( $(date +%s) - t0 )) s"
# The device call brings back at most 8 files: everything but the re-recorded traces and the
# three summaries goes into one archive.
(cd "$OUT" && tar czf results.tar.gz --exclude=results.tar.gz --exclude=rr/rerecord.tar.gz ./* 2>/dev/null)
find "$OUT" -type f ! -name results.tar.gz ! -name rerecord.tar.gz ! -name realistic_overhead.md -delete
find "$OUT" -type f | sed "s|^$OUT/|kept: |"
