#!/usr/bin/env bash
# One batch on one H200 (issue #11: GEMMs certain or silent; issue #12: overhead after the
# session-25 hot path and the cuBLAS interposer):
#   A. the PyTorch GEMM samples (samples/precise/torch_views.py gemm_in|gemm_out racy|clean) and
#      views_racy|views_clean in the default mode: traces kept as fixtures;
#   B. GPT-2 ZeRO-2 and FSDP2 in the default mode (3 timed steps after 1): findings, the cuBLAS
#      notice, traces kept;
#   C. bench/realistic_overhead.sh: zero2 and launch, untraced | streamrace, 3 rounds, with what
#      is left of the deadline.
# Carry `gpu-carry` and `.whl`. Writes $OUT/summary.txt, $OUT/cublas.tar.gz and the overhead results.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
R=/tmp/sr_cublas
rm -rf "$R" && mkdir -p "$R"/runs "$OUT"
SR="$(pwd)/gpu-carry/bin/streamrace"
START=$(date +%s)
DEADLINE_S=${DEADLINE_S:-500}
S="$OUT/summary.txt"
source scripts/gpu/batch_lib.sh
{ echo "== $(date -u +%FT%TZ)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; cat gpu-carry/COMMIT; } > "$S" 2>&1
ONE_GREP="SUMMARY|cuBLAS|median_step_ms|rror|signal|corruption|certain\)|possible\)" ONE_CUT=700
for c in gemm_in_racy gemm_in_clean gemm_out_racy gemm_out_clean views_racy views_clean; do
  one "torch_$c" 60 "$SR" run --no-color -o "$R/runs/torch_$c/t" -- python3 samples/precise/torch_views.py $c
  "$SR" analyze --format json "$R/runs/torch_$c/t" > "$R/runs/torch_$c/report.json" 2>/dev/null
done
eval "$(bash samples/realistic/setup_env.sh --print-env)" > "$R/setup.log" 2>&1
one zero2 150 "$SR" run --no-color -o "$R/runs/zero2/t" -- python3 samples/realistic/gpt2_zero2.py --steps 3 --warmup 1
one fsdp2 150 "$SR" run --no-color -o "$R/runs/fsdp2/t" -- python3 samples/realistic/gpt2_fsdp2.py --steps 3 --warmup 1
for j in zero2 fsdp2; do "$SR" analyze --format json "$R/runs/$j/t" > "$R/runs/$j/report.json" 2>/dev/null; done
echo "part A+B done after $(( $(date +%s) - START )) s" >> "$S"
cd /tmp && tar czf "$OUT/cublas.tar.gz" sr_cublas && cd - >/dev/null
left_s=$(( $(left) - 15 ))
if [ "$left_s" -gt 120 ]; then
  JOBS="zero2 launch" CONFIGS="untraced streamrace" ROUNDS=3 STEPS=30 WARMUP=5 OPS=20000 REPEATS=5 DEADLINE_S=$left_s \
    OUT="$OUT/overhead" bash bench/realistic_overhead.sh > "$OUT/overhead.log" 2>&1
  tail -30 "$OUT/overhead/realistic_overhead.md" >> "$S" 2>/dev/null
else
  echo "overhead skipped: $left_s s left" >> "$S"
fi
echo "done after $(( $(date +%s) - START )) s" >> "$S"
ls -la "$OUT"
