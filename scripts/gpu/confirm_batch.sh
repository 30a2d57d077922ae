#!/usr/bin/env bash
# One batch on one H200 (issue #11, "every racy sample certain after --confirm"): every CUDA,
# PyTorch and precise-mode sample, racy and clean, under `streamrace run --confirm`, then
# (issue #17) `analyze -j N` scaling on the machine's cores. Carry `gpu-carry` (built with
# precise mode, plus bin/streamrace-tracegen). Writes $OUT/summary.txt, $OUT/scaling.txt and
# $OUT/confirm_results.tar.gz (every run's log and traces: the default run's in DIR, the
# confirming run's in DIR/confirm).
#
#   STAGES="confirm scaling"  which parts run (default both)
#   DEADLINE_S=540            the whole batch; a run that does not fit is listed as skipped
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
REPO=$(pwd)
OUT=${OUT:-/tmp/out}
R=/tmp/sr_confirm
rm -rf "$R" && mkdir -p "$R"/runs /tmp/sr_samples "$OUT"
SR="$REPO/gpu-carry/bin/streamrace"
GEN="$REPO/gpu-carry/bin/streamrace-tracegen"
STAGES=${STAGES:-"confirm scaling"}
START=$(date +%s)
DEADLINE_S=${DEADLINE_S:-540}
S="$OUT/summary.txt"
source scripts/gpu/batch_lib.sh

{
  echo "== machine $(date -u +%FT%TZ)"
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader
  nproc; uname -r; head -1 /etc/os-release
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version())'
  "$SR" --version; cat gpu-carry/COMMIT
} > "$S" 2>&1

build_samples() {
  local pids=()
  for f in samples/cuda/*.cu samples/precise/views.cu; do
    local b; b=$(basename "$f" .cu); local extra=""
    case $b in *nccl*) extra=$(nccl_nvcc_flags) ;; esac
    timeout 180 nvcc -O2 -arch=sm_90 -std=c++17 -cudart shared -o /tmp/sr_samples/$b "$f" $extra \
      -Xlinker -rpath,/usr/local/cuda/lib64 > "$R/runs/nvcc_$b.log" 2>&1 &
    pids+=($!)
  done
  wait "${pids[@]}"
  echo "built: $(ls /tmp/sr_samples | tr '\n' ' ')" >> "$S"
}

# run_confirm NAME TIMEOUT CMD... : `run --confirm`, one summary line: exit status, seconds,
# and the report's SUMMARY and --confirm lines.
ONE_GREP="^streamrace: --confirm|SUMMARY|^streamrace run --confirm" ONE_CUT=400 ONE_MARGIN=30
run_confirm() {
  local name=$1 to=$2; shift 2
  one "$name" "$to" "$SR" run --confirm --no-color -o "$R/runs/$name/traces" -- "$@"
}

if [[ " $STAGES " == *" confirm "* ]]; then
  build_samples
  for b in two_streams event_rerecord legacy_stream host_sync free_implicit_sync pageable_copy mallocasync_reuse \
           kernel_args four_threads graph_side_stream graph_two_branches graph_explicit graph_nccl_allreduce; do
    for m in racy clean; do run_confirm "${b}_$m" 40 /tmp/sr_samples/$b $m; done
  done
  for m in racy clean readread disjoint; do run_confirm "views_$m" 40 /tmp/sr_samples/views $m; done
  for m in racy clean; do
    run_confirm "torch_two_streams_$m" 90 python3 samples/torch/two_streams.py $m
    run_confirm "torch_graph_capture_$m" 90 python3 samples/torch/graph_capture.py $m
    run_confirm "torch_graphed_callables_$m" 90 python3 samples/torch/graphed_callables.py $m
  done
  for m in racy record wait; do run_confirm "torch_record_stream_$m" 90 python3 samples/torch/record_stream.py $m; done
  for c in views_racy views_clean raw_racy raw_clean readread disjoint; do
    run_confirm "torch_$c" 90 python3 samples/precise/torch_views.py $c
  done
fi

if [[ " $STAGES " == *" scaling "* ]] && [ "$(left)" -gt 120 ]; then
  SC="$OUT/scaling.txt"
  {
    echo "== analyze -j scaling, $(nproc) cores, $(date -u +%FT%TZ)"
    lscpu | grep -E "Model name|^CPU\(s\)|Thread|Core|Socket|L3"
    mkdir -p /tmp/sc/many /tmp/sc/one
    # 16 traces of 1 M events (a job's ranks), generated in parallel.
    for i in $(seq 0 15); do
      "$GEN" --shape training --events 1000000 --allocations 20000 --seed $((i + 1)) -o /tmp/sc/many/rank$i.srace > /dev/null 2>&1 &
    done
    "$GEN" --shape training --events 10000000 --allocations 100000 -o /tmp/sc/one/big.srace > /dev/null 2>&1 &
    wait
    ls -la /tmp/sc/many | head -3; ls -la /tmp/sc/one
    for round in 1 2 3; do
      for j in 1 2 4 8 16; do
        [ "$(left)" -lt 60 ] && { echo "stopped (deadline)"; break 2; }
        /usr/bin/time -f "many16 j=$j round=$round wall=%e user=%U sys=%S maxrss_kb=%M" \
          "$SR" analyze -j $j -f json -o /tmp/sc/many_j$j.json /tmp/sc/many > /dev/null 2>> /tmp/sc/time.txt
        tail -1 /tmp/sc/time.txt
      done
      for j in 1 2 4 8 16; do
        [ "$(left)" -lt 60 ] && { echo "stopped (deadline)"; break 2; }
        /usr/bin/time -f "split1 j=$j round=$round wall=%e user=%U sys=%S maxrss_kb=%M" \
          "$SR" analyze --split -j $j -f json -o /tmp/sc/one_j$j.json /tmp/sc/one/big.srace > /dev/null 2>> /tmp/sc/time.txt
        tail -1 /tmp/sc/time.txt
      done
    done
    for j in 2 4 8 16; do
      cmp -s /tmp/sc/many_j1.json /tmp/sc/many_j$j.json && echo "many j=$j: JSON identical to j=1" || echo "many j=$j: JSON DIFFERS"
      cmp -s /tmp/sc/one_j1.json /tmp/sc/one_j$j.json && echo "split j=$j: JSON identical to j=1" || echo "split j=$j: JSON DIFFERS"
    done
    python3 -c "import json; d=json.load(open('/tmp/sc/many_j1.json')); print('many: findings', len(d['findings']), 'traces', len(d['traces']), 'records', sum(t['records'] for t in d['traces']))"
    python3 -c "import json; d=json.load(open('/tmp/sc/one_j1.json')); print('one: findings', len(d['findings']), 'records', sum(t['records'] for t in d['traces']))"
  } > "$SC" 2>&1
fi

echo "done after $(( $(date +%s) - START )) s" >> "$S"
cd /tmp && tar czf "$OUT/confirm_results.tar.gz" sr_confirm 2>/dev/null
ls -la "$OUT"
