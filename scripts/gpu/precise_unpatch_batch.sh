#!/usr/bin/env bash
# One batch on one H200 (issue #11 part 4): precise mode with a sample limit, with and without
# unpatching fully sampled modules (SamplePlan, docs/precise-mode.md "Sampling").
#   A. correctness: PyTorch samples under --precise=all (every launch measured: the session's
#      module registry must not lose a measurement) and under --precise-sample 1;
#   B. cost: ZeRO-2, interleaved 3 rotated rounds of untraced | --precise=all --precise-sample 2 |
#      the same with --precise-unpatch 0;
#   C. FSDP2 under --precise=all --precise-sample 2 (findings, counts, exit status).
# Carry `gpu-carry` and `.whl`. Writes $OUT/summary.txt and $OUT/precise_unpatch.tar.gz.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
R=/tmp/sr_unpatch
rm -rf "$R" && mkdir -p "$R"/runs "$OUT"
SR="$(pwd)/gpu-carry/bin/streamrace"
START=$(date +%s)
DEADLINE_S=${DEADLINE_S:-560}
S="$OUT/summary.txt"
source scripts/gpu/batch_lib.sh
{ echo "== $(date -u +%FT%TZ)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; cat gpu-carry/COMMIT; } > "$S" 2>&1
ONE_GREP="SUMMARY|launches measured|median_step_ms|step_ms_in_order|rror|signal|corruption" ONE_CUT=900
for c in views_racy views_clean raw_racy; do
  one "torch_${c}_all" 60 "$SR" run --precise=all --precise-debug --no-color -o "$R/runs/torch_${c}_all/t" -- python3 samples/precise/torch_views.py $c
done
one torch_views_racy_s1 60 "$SR" run --precise=all --precise-sample 1 --precise-debug --no-color -o "$R/runs/torch_views_racy_s1/t" -- python3 samples/precise/torch_views.py views_racy
eval "$(bash samples/realistic/setup_env.sh --print-env)" > "$R/setup.log" 2>&1
J="python3 samples/realistic/gpt2_zero2.py --steps ${STEPS:-6} --warmup 3"
run_cfg() {  # run_cfg CONFIG ROUND
  local c=$1 r=$2 d="$R/runs/$1_$2/t"
  case $c in
    untraced) one "${c}_$r" 90 $J ;;
    unpatch) one "${c}_$r" 120 "$SR" run --precise=all --precise-sample 2 --precise-debug --no-color -o "$d" -- $J ;;
    keep) one "${c}_$r" 120 "$SR" run --precise=all --precise-sample 2 --precise-unpatch 0 --precise-debug --no-color -o "$d" -- $J ;;
  esac
}
cfgs=(untraced unpatch keep)
for r in 1 2 3; do
  for i in 0 1 2; do run_cfg "${cfgs[$(( (i + r - 1) % 3 ))]}" $r; done
done
one fsdp2_unpatch 120 "$SR" run --precise=all --precise-sample 2 --precise-debug --no-color -o "$R/runs/fsdp2_unpatch/t" -- python3 samples/realistic/gpt2_fsdp2.py --steps ${STEPS:-6} --warmup 3
echo "done after $(( $(date +%s) - START )) s" >> "$S"
cd /tmp && tar czf "$OUT/precise_unpatch.tar.gz" sr_unpatch
ls -la "$OUT"
