#!/usr/bin/env bash
# One batch on one H200 (issue #11): precise mode on CUDA graphs and on the realistic jobs.
#  1. graphs: every graph sample, racy and clean, under `run --precise=all` and `run --confirm`
#     (kernel nodes of graph launches must run, unmeasured, and never make a finding "gone");
#  2. where precise mode's time goes on the ZeRO-2 job: untraced, default, --precise=all and
#     --precise=REGEX per kernel class (GEMMs, elementwise, reductions and norms, attention,
#     optimizer), few steps each (precise `all` takes seconds per step);
#  3. `run --confirm` on ZeRO-2 and FSDP2 (no known race: one run, 0 findings expected).
# Carry `gpu-carry` (with precise mode) and `.whl`. Writes $OUT/summary.txt, $OUT/zero2.txt and
# $OUT/precise_real.tar.gz (logs, the default ZeRO-2 trace for kernel names).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
REPO=$(pwd)
OUT=${OUT:-/tmp/out}
R=/tmp/sr_preal
rm -rf "$R" && mkdir -p "$R"/runs /tmp/sr_samples "$OUT"
SR="$REPO/gpu-carry/bin/streamrace"
START=$(date +%s)
DEADLINE_S=${DEADLINE_S:-560}
STAGES=${STAGES:-"graphs zero2 confirm"}
S="$OUT/summary.txt"
Z="$OUT/zero2.txt"
source scripts/gpu/batch_lib.sh
{
  echo "== machine $(date -u +%FT%TZ)"
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version())'
  "$SR" --version; cat gpu-carry/COMMIT
} > "$S" 2>&1

ONE_GREP="^streamrace: --confirm|SUMMARY|^streamrace run --confirm|precise mode:|median_step_ms|rror" ONE_MARGIN=20

if [[ " $STAGES " == *" graphs "* ]]; then
  for b in graph_side_stream graph_two_branches graph_explicit graph_nccl_allreduce; do
    f=samples/cuda/$b.cu; extra=""
    case $b in *nccl*) extra=$(nccl_nvcc_flags) ;; esac
    timeout 180 nvcc -O2 -arch=sm_90 -std=c++17 -cudart shared -o /tmp/sr_samples/$b "$f" $extra -Xlinker -rpath,/usr/local/cuda/lib64 &
  done
  wait
  for b in graph_side_stream graph_two_branches graph_explicit graph_nccl_allreduce; do
    for m in racy clean; do
      one "${b}_${m}_precise" 40 "$SR" run --precise=all --no-color -o "$R/runs/${b}_${m}_precise/t" -- /tmp/sr_samples/$b $m
      one "${b}_${m}_confirm" 40 "$SR" run --confirm --no-color -o "$R/runs/${b}_${m}_confirm/t" -- /tmp/sr_samples/$b $m
    done
  done
  for p in graph_capture graphed_callables; do
    for m in racy clean; do
      one "torch_${p}_${m}_precise" 90 "$SR" run --precise=all --no-color -o "$R/runs/torch_${p}_${m}_precise/t" -- python3 samples/torch/$p.py $m
    done
  done
fi

if [[ " $STAGES " == *" zero2 "* ]] || [[ " $STAGES " == *" confirm "* ]]; then
  eval "$(bash samples/realistic/setup_env.sh --print-env)" > "$R/setup.log" 2>&1
  python3 -c 'import deepspeed; print("deepspeed", deepspeed.__version__)' >> "$S" 2>&1
fi

if [[ " $STAGES " == *" zero2 "* ]]; then
  J="python3 samples/realistic/gpt2_zero2.py"
  echo "== ZeRO-2 GPT-2 124M, one rank, bf16; median ms per step (steps after warm-up)" > "$Z"
  one z2_untraced 120 $J --steps 8 --warmup 2
  one z2_default 120 "$SR" run --no-color -o "$R/runs/z2_default/t" -- $J --steps 8 --warmup 2
  one z2_precise_all 200 "$SR" run --precise=all --precise-debug --no-color -o "$R/runs/z2_precise_all/t" -- $J --steps 3 --warmup 1
  for cls in "gemm=gemm|xmma|cutlass|nvjet|cublas|sm90" "elementwise=elementwise" "reduce_norm=reduce_kernel|norm|softmax|nll_loss|cross_entropy" \
             "attention=flash|fmha|attention|sdpa|cudnn" "optimizer=multi_tensor|adam|Adam|foreach"; do
    n=${cls%%=*}; re=${cls#*=}
    one "z2_precise_$n" 150 "$SR" run "--precise=$re" --precise-debug --no-color -o "$R/runs/z2_precise_$n/t" -- $J --steps 3 --warmup 1
  done
  for f in "$R"/runs/z2_*/log.txt; do
    n=$(basename "$(dirname "$f")")
    echo "$n $(grep -E "median_step_ms" "$f" | tail -1) $(grep -E "launches measured" "$f" | head -1 | cut -c1-200)" >> "$Z"
  done
fi

if [[ " $STAGES " == *" confirm "* ]]; then
  one z2_confirm 200 "$SR" run --confirm --no-color -o "$R/runs/z2_confirm/t" -- python3 samples/realistic/gpt2_zero2.py --steps 3 --warmup 1
  one fsdp2_confirm 200 "$SR" run --confirm --no-color -o "$R/runs/fsdp2_confirm/t" -- python3 samples/realistic/gpt2_fsdp2.py --steps 3 --warmup 1
fi

echo "done after $(( $(date +%s) - START )) s" >> "$S"
# Keep the tarball small: logs, the small graph traces and the default ZeRO-2 trace.
cd /tmp && find sr_preal -name "*.srace" -size +20M -delete; tar czf "$OUT/precise_real.tar.gz" sr_preal 2>/dev/null
ls -la "$OUT"
