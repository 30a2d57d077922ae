#!/usr/bin/env bash
# One batch on one H200 (issue #11 part 4): what precise mode costs on the ZeRO-2 job, and how
# much of it is left when each kernel and launch shape is measured at most twice
# (--precise-sample 2; the analysis applies what those launches taught to the rest).
# Configurations, interleaved, 3 rounds (rotated):
#   untraced | --precise=all | --precise=all --precise-sample 2 |
#   floor: every module patched, no launch measured (--precise='regex:^$' --precise-module-filter 0)
# Carry `gpu-carry` and `.whl`. Writes $OUT/summary.txt and $OUT/precise_sample.tar.gz.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
R=/tmp/sr_psample
rm -rf "$R" && mkdir -p "$R"/runs "$OUT"
SR="$(pwd)/gpu-carry/bin/streamrace"
START=$(date +%s)
DEADLINE_S=${DEADLINE_S:-540}
S="$OUT/summary.txt"
source scripts/gpu/batch_lib.sh
{ echo "== $(date -u +%FT%TZ)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; cat gpu-carry/COMMIT; } > "$S" 2>&1
eval "$(bash samples/realistic/setup_env.sh --print-env)" > "$R/setup.log" 2>&1
ONE_GREP="SUMMARY|launches measured|median_step_ms|rror|signal" ONE_CUT=500
J="python3 samples/realistic/gpt2_zero2.py --steps 3 --warmup 2"
run_cfg() {  # run_cfg CONFIG ROUND
  local c=$1 r=$2 d="$R/runs/$1_$2/t"
  case $c in
    untraced) one "${c}_$r" 90 $J ;;
    all) one "${c}_$r" 120 "$SR" run --precise=all --precise-debug --no-color -o "$d" -- $J ;;
    sample2) one "${c}_$r" 120 "$SR" run --precise=all --precise-sample 2 --precise-debug --no-color -o "$d" -- $J ;;
    floor) one "${c}_$r" 120 "$SR" run '--precise=regex:^$' --precise-module-filter 0 --precise-debug --no-color -o "$d" -- $J ;;
  esac
}
cfgs=(untraced all sample2 floor)
for r in 1 2 3; do
  for i in 0 1 2 3; do run_cfg "${cfgs[$(( (i + r - 1) % 4 ))]}" $r; done
done
echo "done after $(( $(date +%s) - START )) s" >> "$S"
cd /tmp && tar czf "$OUT/precise_sample.tar.gz" sr_psample
