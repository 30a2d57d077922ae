#!/usr/bin/env bash
# One batch on one H200 (issue #11 part 4): precise mode's cost and findings on the ZeRO-2 job
# after the coarse table (untraced, --precise=all, untraced, interleaved), with the precise
# samples' findings re-checked. Carry `gpu-carry` (precise) and `.whl`. Writes
# $OUT/summary.txt and $OUT/precise_cost.tar.gz (logs, the ZeRO-2 precise trace).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
R=/tmp/sr_pcost
rm -rf "$R" && mkdir -p "$R"/runs /tmp/sr_samples "$OUT"
SR="$(pwd)/gpu-carry/bin/streamrace"
START=$(date +%s)
DEADLINE_S=${DEADLINE_S:-300}
S="$OUT/summary.txt"
source scripts/gpu/batch_lib.sh
{ echo "== $(date -u +%FT%TZ)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; cat gpu-carry/COMMIT; } > "$S" 2>&1
ONE_GREP="SUMMARY|launches measured|median_step_ms|had no measured|rror|signal" ONE_CUT=700
for b in async_copy views; do
  timeout 120 nvcc -O2 -arch=sm_90 -std=c++17 -cudart shared -o /tmp/sr_samples/$b samples/precise/$b.cu -Xlinker -rpath,/usr/local/cuda/lib64 &
done
wait
for m in racy clean readread disjoint; do one "views_$m" 30 "$SR" run --precise=all --no-color -o "$R/runs/views_$m/t" -- /tmp/sr_samples/views $m; done
for m in racy clean; do one "async_copy_$m" 30 "$SR" run --precise=all --no-color -o "$R/runs/async_copy_$m/t" -- /tmp/sr_samples/async_copy $m; done
for c in views_racy disjoint gemm_in_racy; do one "torch_$c" 60 "$SR" run --precise=all --no-color -o "$R/runs/torch_$c/t" -- python3 samples/precise/torch_views.py $c; done
eval "$(bash samples/realistic/setup_env.sh --print-env)" > "$R/setup.log" 2>&1
J="python3 samples/realistic/gpt2_zero2.py"
one z2_untraced_1 90 $J --steps 6 --warmup 2
one z2_precise_all 150 "$SR" run --precise=all --precise-debug --no-color -o "$R/runs/z2_precise_all/t" -- $J --steps 3 --warmup 1
one z2_untraced_2 90 $J --steps 6 --warmup 2
echo "done after $(( $(date +%s) - START )) s" >> "$S"
cd /tmp && tar czf "$OUT/precise_cost.tar.gz" sr_pcost
