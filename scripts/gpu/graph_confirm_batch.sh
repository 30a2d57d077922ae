#!/usr/bin/env bash
# Issue #11, kernel nodes of CUDA graphs measured in precise mode (trace format 1.6,
# KernelNodeAccess): ONE call on one H200 under a global deadline (DEADLINE_S, default 300 s).
#   1. builds the CUDA graph samples (graph_explicit, graph_side_stream, graph_two_branches,
#      graph_nccl_allreduce);
#   2. runs each racy and clean under `streamrace run --confirm` and `streamrace run
#      --precise=all`, then the PyTorch graph samples (graph_capture.py, graphed_callables.py)
#      likewise; one summary line per run: exit status, seconds, the report's SUMMARY and
#      --confirm lines, the closing notices about kernel nodes;
#   3. analyses every precise run's traces with `analyze -f json=` (kept for fixtures).
# Carry ["gpu-carry"] (scripts/gpu/build_carry.sh). Writes under $OUT: summary.txt,
# results.tar.gz (runs/<name>/log.txt, traces, reports).
#
# Fixtures from its output (CPU machine): copy runs/graph_explicit_{racy,clean}_precise/traces
# into tests/data/precise/graph_explicit_{racy,clean}_precise/ with a case.json, then
# `tests/update_expected.sh --update '*graph_explicit_*_precise*'` and review.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$REPO" || exit 2
OUT=${OUT:-/tmp/graph_confirm_out}
R=/tmp/sr_graph_confirm
rm -rf "$R" && mkdir -p "$R/runs" "$R/bin" "$OUT"
SR="$REPO/gpu-carry/bin/streamrace"
START=$(date +%s)
DEADLINE_S=${DEADLINE_S:-300}
S="$OUT/summary.txt"
source scripts/gpu/batch_lib.sh
{
  echo "== machine $(date -u +%FT%TZ)"
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version())'
  "$SR" --version; cat gpu-carry/COMMIT
} > "$S" 2>&1
[ -x "$SR" ] || { echo "no $SR: build gpu-carry and carry it" >> "$S"; exit 2; }

pids=()
for b in graph_explicit graph_side_stream graph_two_branches graph_nccl_allreduce; do
  extra=""; case $b in *nccl*) extra=$(nccl_nvcc_flags) ;; esac
  timeout 150 nvcc -O2 -arch=sm_90 -std=c++17 -cudart shared -o "$R/bin/$b" "samples/cuda/$b.cu" $extra \
    -Xlinker -rpath,/usr/local/cuda/lib64 > "$R/runs/nvcc_$b.log" 2>&1 &
  pids+=($!)
done
wait "${pids[@]}"
echo "built: $(ls "$R/bin" | tr '\n' ' ')" >> "$S"

ONE_GREP="SUMMARY|^streamrace: --confirm|^streamrace run --confirm|^  (confirmed|gone|still possible)|kernel nodes" ONE_CUT=900 ONE_MARGIN=20
confirm() { local n=$1 t=$2; shift 2; one "${n}_confirm" "$t" "$SR" run --confirm --no-color -o "$R/runs/${n}_confirm/traces" -- "$@"; }
precise() {
  local n=$1 t=$2; shift 2
  one "${n}_precise" "$t" "$SR" run --precise=all --no-color -o "$R/runs/${n}_precise/traces" -- "$@"
  [ -d "$R/runs/${n}_precise/traces" ] &&
    timeout 60 "$SR" analyze --no-color -f "json=$R/runs/${n}_precise/report.json" "$R/runs/${n}_precise/traces" \
      > "$R/runs/${n}_precise/analyze.txt" 2>&1
}

for b in graph_explicit graph_side_stream graph_two_branches graph_nccl_allreduce; do
  [ -x "$R/bin/$b" ] || { echo "$b: not built ($(tail -2 "$R/runs/nvcc_$b.log" | tr '\n' ' '))" >> "$S"; continue; }
  for m in racy clean; do
    confirm "${b}_$m" 60 "$R/bin/$b" $m
    precise "${b}_$m" 60 "$R/bin/$b" $m
  done
done
for p in graph_capture graphed_callables; do
  for m in racy clean; do
    confirm "torch_${p}_$m" 90 python3 "samples/torch/$p.py" $m
    precise "torch_${p}_$m" 90 python3 "samples/torch/$p.py" $m
  done
done
# graph_nccl_allreduce racy under --precise=all was killed by SIGSEGV once (run 15): with and
# without graph-node measurement (STREAMRACE_PRECISE_GRAPH_NODES), twice each.
if [ -x "$R/bin/graph_nccl_allreduce" ]; then
  echo "gdb: $(command -v gdb || echo none)" >> "$S"
  for i in 1 2; do
    for g in 1 0; do
      STREAMRACE_PRECISE_GRAPH_NODES=$g one "nccl_graph_precise_nodes${g}_$i" 60 "$SR" run --precise=all --no-color \
        -o "$R/runs/nccl_graph_precise_nodes${g}_$i/traces" -- "$R/bin/graph_nccl_allreduce" racy
      grep -m1 "killed by signal" "$R/runs/nccl_graph_precise_nodes${g}_$i/log.txt" >> "$S"
    done
  done
fi
echo "== done $(date -u +%FT%TZ), $(( $(date +%s) - START )) s" >> "$S"
tar -C "$R" -czf "$OUT/results.tar.gz" runs
