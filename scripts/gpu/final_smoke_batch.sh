#!/usr/bin/env bash
# A short end-to-end check on one H200 of the merged tracer (XXH3 arguments' hash, cuBLAS call
# ranges, unpatching under sampling, all at once): PyTorch samples in both modes, a GEMM under
# --confirm, GPT-2 ZeRO-2 in the default mode and sampled precise mode, and signatures learnt
# from the sampled run applied to the default one (the new hash on both sides).
# Carry `gpu-carry` and `.whl`. Writes $OUT/summary.txt.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
R=/tmp/sr_smoke
rm -rf "$R" && mkdir -p "$R"/runs "$OUT"
SR="$(pwd)/gpu-carry/bin/streamrace"
START=$(date +%s)
DEADLINE_S=${DEADLINE_S:-200}
S="$OUT/summary.txt"
source scripts/gpu/batch_lib.sh
{ echo "== $(date -u +%FT%TZ)"; cat gpu-carry/COMMIT; } > "$S" 2>&1
ONE_GREP="SUMMARY|confirmed|cuBLAS|access signatures|launches measured|median_step_ms|rror|signal|corruption" ONE_CUT=800
one views_racy_d 40 "$SR" run --no-color -o "$R/runs/vd/t" -- python3 samples/precise/torch_views.py views_racy
one views_racy_p 40 "$SR" run --precise=all --no-color -o "$R/runs/vp/t" -- python3 samples/precise/torch_views.py views_racy
one gemm_in_racy_confirm 50 "$SR" run --confirm --no-color -o "$R/runs/gc/t" -- python3 samples/precise/torch_views.py gemm_in_racy
eval "$(bash samples/realistic/setup_env.sh --print-env)" > "$R/setup.log" 2>&1
J="python3 samples/realistic/gpt2_zero2.py --steps 3 --warmup 1"
one zero2_sample 90 "$SR" run --precise=all --precise-sample 2 --precise-debug --no-color -o "$R/runs/zs/t" -- $J
"$SR" analyze "$R/runs/zs/t" --learn-signatures "$R/sig.json" > /dev/null 2>&1
one zero2_default_sig 90 "$SR" run --signatures "$R/sig.json" --no-color -o "$R/runs/zd/t" -- $J
echo "done after $(( $(date +%s) - START )) s" >> "$S"
