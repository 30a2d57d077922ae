#!/usr/bin/env bash
# Precise-mode batch for the GPU machine (issue 7). Expects the precise build carried in
# gpu-carry/ (or gpu-carry-precise/) {bin,lib} (streamrace, libstreamrace.so, streamrace_precise_patches.fatbin;
# built on the CPU machine with -DSTREAMRACE_BUILD_PRECISE=ON against the CUDA 13.0 Sanitizer
# API headers). Steps, each under a timeout, all before a global deadline (DEADLINE_S):
#   1. smoke: samples/precise/views.cu racy with the Sanitizer session started at load time
#      and at CUDA initialisation; the first that yields measured intervals is used below;
#   2. the CUDA views sample (racy/clean/readread/disjoint) and the PyTorch cases of
#      samples/precise/torch_views.py, each in the default mode and with --precise;
#   3. slowdown: bench/tracer_overhead.py untraced, default mode, --precise=all and a
#      targeted --precise=REGEX.
# Everything lands in $OUT/precise_results.tar.gz (traces, logs, summary.txt).
set -u
export PYTHONUNBUFFERED=1
REPO=$(pwd)
OUT=${OUT:-/tmp/out}
DEADLINE_S=${DEADLINE_S:-520}
BENCH_STEPS=${BENCH_STEPS:-20}
TARGET_REGEX=${TARGET_REGEX:-layer_norm}
R=/tmp/pr_results
rm -rf "$R" && mkdir -p "$R"/traces "$R"/logs "$OUT"
CARRY="$REPO/gpu-carry-precise"; [ -d "$CARRY" ] || CARRY="$REPO/gpu-carry"  # scripts/gpu/build_carry.sh
SR="$CARRY/bin/streamrace"
export LD_LIBRARY_PATH=/usr/local/cuda/compute-sanitizer:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
exec >"$R/logs/batch.log" 2>&1
S="$R/logs/summary.txt"

finish() {
  cp "$R/logs/batch.log" "$OUT/batch.log" 2>/dev/null
  cp "$S" "$OUT/summary.txt" 2>/dev/null
  tar czf "$OUT/precise_results.tar.gz" -C "$R" . 2>/dev/null
}
trap finish EXIT

echo "== machine"
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
ls -la /usr/local/cuda/compute-sanitizer/ | head -20
compute-sanitizer --version 2>&1 | tail -1
ldd "$CARRY/lib/libstreamrace.so" | grep -i "not found"
nvcc -O2 -arch=sm_90 -std=c++17 -cudart shared -o /tmp/views samples/precise/views.cu -Xlinker -rpath,/usr/local/cuda/lib64 || echo "views build failed"

left() { echo $((DEADLINE_S - SECONDS)); }
run_case() {  # name precise-arg cmd... ; precise-arg "-" = default mode
  local name=$1 pa=$2; shift 2
  if [ "$(left)" -lt 15 ]; then echo "$name skipped rc=deadline" | tee -a "$S"; return; fi
  local t=$(( $(left) < ${CASE_TIMEOUT:-90} ? $(left) : ${CASE_TIMEOUT:-90} ))
  local dir="$R/traces/$name"; mkdir -p "$dir"
  local args=(run --no-color -o "$dir")
  [ "$pa" != "-" ] && args+=("--precise=$pa")
  [ -n "${PRECISE_FROM:-}" ] && args+=(--precise-from "$PRECISE_FROM")
  local t0=$SECONDS
  STREAMRACE_PRECISE_DEBUG=1 timeout -k 5 "$t" "$SR" "${args[@]}" -- "$@" > "$R/logs/$name.log" 2>&1
  local rc=$?
  echo "$name rc=$rc secs=$((SECONDS - t0))" | tee -a "$S"
  "$SR" analyze --format json "$dir" > "$R/logs/$name.json" 2>>"$R/logs/$name.log"
  grep -o '"confidence": *"[a-z]*"' "$R/logs/$name.json" | sort | uniq -c | sed "s/^/   $name /" | tee -a "$S"
  grep -h "streamrace (pid\|precise mode\|streamrace:" "$R/logs/$name.log" | head -5 | sed "s/^/   $name: /" | tee -a "$S"
}

echo "== 1. smoke" | tee -a "$S"
START=load
for st in load init; do
  STREAMRACE_PRECISE_START=$st run_case "smoke_$st" all /tmp/views racy
done
if grep -q '"certain"' "$R/logs/smoke_load.json" 2>/dev/null; then START=load
elif grep -q '"certain"' "$R/logs/smoke_init.json" 2>/dev/null; then START=init
fi
export STREAMRACE_PRECISE_START=$START
echo "start=$START" | tee -a "$S"

echo "== 2. samples" | tee -a "$S"
for m in racy clean readread disjoint; do
  run_case "views_${m}_default" - /tmp/views $m
  run_case "views_${m}_precise" all /tmp/views $m
done
for c in views_racy views_clean raw_racy raw_clean readread disjoint; do
  run_case "torch_${c}_default" - python3 samples/precise/torch_views.py $c
  run_case "torch_${c}_precise" all python3 samples/precise/torch_views.py $c
done

# --precise=auto: the kernels of the default run's possible finding, and only those.
PRECISE_FROM="$R/traces/torch_views_racy_default" run_case torch_views_racy_auto auto python3 samples/precise/torch_views.py views_racy

# NCCL under precise mode (2 GPUs): NCCL's kernels must stay unpatched, the collective's
# semantics come from the NCCL calls.
if [ "$(nvidia-smi -L | wc -l)" -ge 2 ]; then
  export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
  run_case torch_nccl_racy_precise all python3 -m torch.distributed.run --nproc_per_node=2 samples/torch/nccl_allreduce.py racy
  run_case torch_nccl_clean_precise all python3 -m torch.distributed.run --nproc_per_node=2 samples/torch/nccl_allreduce.py clean
fi

if [ -n "${SKIP_BENCH:-}" ]; then echo "== 3. slowdown skipped (SKIP_BENCH)" | tee -a "$S"; exit 0; fi
echo "== 3. slowdown" | tee -a "$S"
bench() {  # name cmd...
  local name=$1; shift
  if [ "$(left)" -lt 20 ]; then echo "bench $name skipped (deadline)" | tee -a "$S"; return; fi
  local t=$(( $(left) < 150 ? $(left) : 150 ))
  local t0=$SECONDS
  STREAMRACE_PRECISE_DEBUG=1 timeout -k 5 "$t" "$@" > "$R/logs/bench_$name.log" 2>&1
  echo "bench $name rc=$? secs=$((SECONDS - t0)) $(grep -h median_step_ms "$R/logs/bench_$name.log")" | tee -a "$S"
  grep -h "streamrace (pid" "$R/logs/bench_$name.log" | head -2 | sed "s/^/   /" | tee -a "$S"
}
bench untraced python3 bench/tracer_overhead.py "$BENCH_STEPS"
bench targeted "$SR" run --no-color -o "$R/traces/bench_targeted" "--precise=$TARGET_REGEX" -- python3 bench/tracer_overhead.py "$BENCH_STEPS"
STREAMRACE_PRECISE_MODULE_FILTER=0 bench targeted_nofilter "$SR" run --no-color -o "$R/traces/bench_nofilter" "--precise=$TARGET_REGEX" -- python3 bench/tracer_overhead.py "$BENCH_STEPS"
bench all "$SR" run --no-color -o "$R/traces/bench_all" --precise=all -- python3 bench/tracer_overhead.py "$BENCH_STEPS"
rm -rf "$R/traces/bench_targeted" "$R/traces/bench_all" "$R/traces/bench_nofilter"
echo "== done in ${SECONDS}s" | tee -a "$S"
