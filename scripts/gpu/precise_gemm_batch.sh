#!/usr/bin/env bash
# One batch on one H200 (issue #11 part 4): does precise mode see a cuBLAS GEMM's loads and
# stores (samples/precise/torch_views.py gemm_* under `run --confirm` and `--precise=all`), what
# does it cost per GEMM (bench/precise_gemm_cost.py untraced and under --precise=all, twice
# each, interleaved), and a host backtrace (cuda-gdb) of the graphed-callables sample that
# aborted at exit under --precise=all. Carry `gpu-carry`. Writes $OUT/summary.txt and
# $OUT/precise_gemm.tar.gz.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
R=/tmp/sr_gemm
rm -rf "$R" && mkdir -p "$R"/runs "$OUT"
SR="$(pwd)/gpu-carry/bin/streamrace"
START=$(date +%s)
DEADLINE_S=${DEADLINE_S:-300}
S="$OUT/summary.txt"
source scripts/gpu/batch_lib.sh
{ echo "== $(date -u +%FT%TZ)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; cat gpu-carry/COMMIT; } > "$S"
ONE_GREP="^streamrace: --confirm|SUMMARY|launches measured|^gemm|  (confirmed|gone|still possible):" ONE_CUT=900
for c in gemm_in_racy gemm_in_clean gemm_out_racy gemm_out_clean; do
  one "${c}_confirm" 60 "$SR" run --confirm --no-color -o "$R/runs/${c}_confirm/t" -- python3 samples/precise/torch_views.py $c
  one "${c}_precise" 60 "$SR" run --precise=all --no-color -o "$R/runs/${c}_precise/t" -- python3 samples/precise/torch_views.py $c
done
for round in 1 2; do
  one "gemm_cost_untraced_$round" 60 python3 bench/precise_gemm_cost.py 10
  one "gemm_cost_precise_$round" 150 "$SR" run --precise=all --precise-debug --no-color -o "$R/runs/gemm_cost_precise_$round/t" -- python3 bench/precise_gemm_cost.py 10
done
if [ "$(left)" -gt 90 ]; then
  mkdir -p "$R/runs/gdb"
  timeout -k 5 80 env STREAMRACE_OUT="$R/runs/gdb" STREAMRACE_PRECISE=all LD_PRELOAD="$(pwd)/gpu-carry/lib/libstreamrace.so" \
    cuda-gdb -batch -ex "set cuda api_failures ignore" -ex run -ex "bt 40" -ex "info threads" --args python3 samples/torch/graphed_callables.py racy \
    > "$R/runs/gdb/log.txt" 2>&1
  echo "gdb rc=$? $(grep -E "^#|signal|SIG" "$R/runs/gdb/log.txt" | head -30 | tr '\n' '|' | cut -c1-2500)" >> "$S"
fi
echo "done after $(( $(date +%s) - START )) s" >> "$S"
cd /tmp && find sr_gemm -name "*.srace" -size +20M -delete; tar czf "$OUT/precise_gemm.tar.gz" sr_gemm
