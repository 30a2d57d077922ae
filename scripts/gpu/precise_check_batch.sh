#!/usr/bin/env bash
# One batch on one H200 (issue #11): precise mode after the TMA fallback and the async-copy
# instrumentation.
#  1. samples/precise/async_copy.cu (cp.async reads; SASS checked for LDGSTS) racy and clean,
#     --precise=all and --confirm;
#  2. torch_views.py gemm_* (cuBLAS sm90 GEMMs, TMA) in the default tier, --precise=all and
#     --confirm: the traces become fixtures (fixtures/<case>/);
#  3. views.cu in precise mode (unchanged findings), the graphed-callables sample that aborted
#     at exit under --precise=all;
#  4. ZeRO-2: --precise=all (time per step, findings) and --confirm; FSDP2 --confirm.
# Carry `gpu-carry` (precise) and `.whl`. Writes $OUT/summary.txt and $OUT/precise_check.tar.gz.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
R=/tmp/sr_pcheck
rm -rf "$R" && mkdir -p "$R"/runs "$R"/fixtures /tmp/sr_samples "$OUT"
SR="$(pwd)/gpu-carry/bin/streamrace"
START=$(date +%s)
DEADLINE_S=${DEADLINE_S:-420}
S="$OUT/summary.txt"
source scripts/gpu/batch_lib.sh
{ echo "== $(date -u +%FT%TZ)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; cat gpu-carry/COMMIT
  python3 -c 'import torch; print("torch", torch.__version__)'; } > "$S" 2>&1
ONE_GREP="^streamrace: --confirm|SUMMARY|launches measured|median_step_ms|had no measured|^  (confirmed|gone|still possible):|rror|signal" ONE_CUT=1200
for b in async_copy views; do
  timeout 120 nvcc -O2 -arch=sm_90 -std=c++17 -cudart shared -o /tmp/sr_samples/$b samples/precise/$b.cu -Xlinker -rpath,/usr/local/cuda/lib64 &
done
wait
echo "async_copy SASS: LDGSTS $(cuobjdump --dump-sass /tmp/sr_samples/async_copy | grep -c LDGSTS), LDG $(cuobjdump --dump-sass /tmp/sr_samples/async_copy | grep -c 'LDG\.')" >> "$S"
for m in racy clean; do
  one "async_copy_${m}_precise" 40 "$SR" run --precise=all --no-color -o "$R/fixtures/async_copy_${m}_precise" -- /tmp/sr_samples/async_copy $m
  one "async_copy_${m}_default" 40 "$SR" run --no-color -o "$R/fixtures/async_copy_${m}_default" -- /tmp/sr_samples/async_copy $m
  one "async_copy_${m}_confirm" 40 "$SR" run --confirm --no-color -o "$R/runs/async_copy_${m}_confirm/t" -- /tmp/sr_samples/async_copy $m
done
for c in gemm_in_racy gemm_in_clean gemm_out_racy gemm_out_clean; do
  one "torch_${c}_default" 60 "$SR" run --no-color -o "$R/fixtures/torch_${c}_default" -- python3 samples/precise/torch_views.py $c
  one "torch_${c}_precise" 60 "$SR" run --precise=all --no-color -o "$R/fixtures/torch_${c}_precise" -- python3 samples/precise/torch_views.py $c
  one "torch_${c}_confirm" 60 "$SR" run --confirm --no-color -o "$R/runs/torch_${c}_confirm/t" -- python3 samples/precise/torch_views.py $c
done
for m in racy clean readread disjoint; do
  one "views_${m}_precise" 30 "$SR" run --precise=all --no-color -o "$R/runs/views_${m}_precise/t" -- /tmp/sr_samples/views $m
done
one graphed_callables_racy_precise 60 "$SR" run --precise=all --no-color -o "$R/runs/graphed_callables_racy_precise/t" -- python3 samples/torch/graphed_callables.py racy
eval "$(bash samples/realistic/setup_env.sh --print-env)" > "$R/setup.log" 2>&1
one z2_precise_all 150 "$SR" run --precise=all --precise-debug --no-color -o "$R/runs/z2_precise_all/t" -- python3 samples/realistic/gpt2_zero2.py --steps 3 --warmup 1
one z2_confirm 120 "$SR" run --confirm --no-color -o "$R/runs/z2_confirm/t" -- python3 samples/realistic/gpt2_zero2.py --steps 3 --warmup 1
one fsdp2_confirm 120 "$SR" run --confirm --no-color -o "$R/runs/fsdp2_confirm/t" -- python3 samples/realistic/gpt2_fsdp2.py --steps 3 --warmup 1
echo "done after $(( $(date +%s) - START )) s" >> "$S"
cd /tmp && find sr_pcheck/runs -name "*.srace" -size +5M -delete; tar czf "$OUT/precise_check.tar.gz" sr_pcheck
