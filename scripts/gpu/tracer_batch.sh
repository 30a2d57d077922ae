#!/usr/bin/env bash
# One batch on the 2 x H200 machine (issue 3): runs every CUDA and PyTorch sample under
# `streamrace run`, the tracer overhead benchmark, and the CUPTI-busy check; everything it
# produces goes into $OUT/results.tar.gz.
#
# Expects the tracer and CLI built elsewhere and carried in gpu-carry/{bin,lib} (a
# self-contained libstreamrace.so and the streamrace binary), because the GPU machine has
# no LLVM libunwind. Samples are compiled here with nvcc for sm_90.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
REPO=$(pwd)
OUT=${OUT:-/tmp/out}
R=/tmp/sr_results
rm -rf "$R" && mkdir -p "$R"/traces "$R"/logs /tmp/sr_samples
SR="$REPO/gpu-carry/bin/streamrace"
LIB="$REPO/gpu-carry/lib/libstreamrace.so"
# Output goes to the terminal and the log; no process substitution (a bare `wait` below
# would wait for it forever).
exec >"$R/logs/batch.log" 2>&1
tail -f "$R/logs/batch.log" --pid=$$ >/dev/stderr &

echo "== machine"
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv
nvcc --version | tail -2
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version(), "gpus", torch.cuda.device_count())'
uname -r; lsb_release -ds 2>/dev/null || head -1 /etc/os-release
ldd "$LIB" | sed 's/^/  lib: /'; ldd "$SR" | grep -i "not found" && echo "streamrace binary misses libraries"
"$SR" --version

echo "== build samples"
NCCL_INC=""; NCCL_LIBDIR=""
for d in /usr/local/cuda/include /usr/include; do [ -f $d/nccl.h ] && NCCL_INC=$d && break; done
PYNCCL=$(python3 -c 'import nvidia.nccl, os; print(list(nvidia.nccl.__path__)[0])' 2>/dev/null)
if [ -z "$NCCL_INC" ] && [ -n "$PYNCCL" ]; then NCCL_INC=$PYNCCL/include; fi
for d in /usr/local/cuda/lib64 /usr/lib/x86_64-linux-gnu "$PYNCCL/lib"; do ls $d/libnccl.so* >/dev/null 2>&1 && NCCL_LIBDIR=$d && break; done
echo "nccl include=$NCCL_INC lib=$NCCL_LIBDIR"
[ -e "$NCCL_LIBDIR/libnccl.so" ] || { mkdir -p /tmp/ncclink && ln -sf "$NCCL_LIBDIR"/libnccl.so.2 /tmp/ncclink/libnccl.so && NCCL_LINKDIR=/tmp/ncclink; }
NCCL_LINKDIR=${NCCL_LINKDIR:-$NCCL_LIBDIR}
pids=()
for f in samples/cuda/*.cu; do
  b=$(basename $f .cu); extra=""
  case $b in *nccl_allreduce) extra="-I$NCCL_INC -L$NCCL_LINKDIR -lnccl -Xlinker -rpath,$NCCL_LIBDIR" ;; esac
  timeout 180 nvcc -O2 -arch=sm_90 -std=c++17 -cudart shared -o /tmp/sr_samples/$b $f $extra \
    -Xlinker -rpath,/usr/local/cuda/lib64 &
  pids+=($!)
done
wait "${pids[@]}"
ls /tmp/sr_samples

run_sample() {  # name mode cmd...
  local name=$1 mode=$2; shift 2
  local dir="$R/traces/${name}_${mode}"
  mkdir -p "$dir"
  local t0=$(date +%s)
  timeout -k 5 "${SAMPLE_TIMEOUT:-120}" "$SR" run --no-color -o "$dir" -- "$@" > "$R/logs/${name}_${mode}.log" 2>&1
  local rc=$?
  echo "$name $mode rc=$rc secs=$(( $(date +%s) - t0 ))" | tee -a "$R/logs/summary.txt"
  # Two hung runs in a row: the tracer itself is stuck; keep the lease for the logs.
  if [ $rc = 124 ]; then TIMEOUTS=$((${TIMEOUTS:-0} + 1)); else TIMEOUTS=0; fi
  if [ "${TIMEOUTS:-0}" -ge 2 ]; then
    echo "two runs in a row timed out: stopping the sample batch" | tee -a "$R/logs/summary.txt"
    cd /tmp && tar czf "$OUT/results.tar.gz" sr_results
    exit 3
  fi
}

echo "== CUDA samples"
SAMPLE_TIMEOUT=${SAMPLE_TIMEOUT:-25}
for b in two_streams event_rerecord legacy_stream host_sync free_implicit_sync pageable_copy mallocasync_reuse \
         kernel_args four_threads nccl_allreduce graph_side_stream graph_two_branches; do
  for m in racy clean; do run_sample $b $m /tmp/sr_samples/$b $m; done
done

echo "== PyTorch samples"
SAMPLE_TIMEOUT=60
for m in racy clean; do
  run_sample torch_two_streams $m python3 samples/torch/two_streams.py $m
  run_sample torch_nccl_allreduce $m python3 -m torch.distributed.run --nproc_per_node=2 samples/torch/nccl_allreduce.py $m
done

echo "== CUPTI slot taken by compute-sanitizer"
run_sample cupti_busy racy compute-sanitizer --tool memcheck /tmp/sr_samples/two_streams racy

if [ "${SKIP_OVERHEAD:-0}" = 1 ]; then
  cd /tmp && tar czf "$OUT/results.tar.gz" sr_results && ls -la "$OUT"
  exit 0
fi
echo "== overhead: launch-bound loop (100k empty launches)"
B="$R/logs/bench.txt"
for i in 1 2 3; do
  /tmp/sr_samples/launch_bench 100000 | sed "s/^/untraced /" >> $B
  mkdir -p /tmp/bt && STREAMRACE_OUT=/tmp/bt LD_PRELOAD=$LIB /tmp/sr_samples/launch_bench 100000 | sed "s/^/traced_native_stacks /" >> $B
  STREAMRACE_STACKS=none STREAMRACE_OUT=/tmp/bt LD_PRELOAD=$LIB /tmp/sr_samples/launch_bench 100000 | sed "s/^/traced_no_stacks /" >> $B
done
ls -la /tmp/bt >> $B
echo "== overhead: transformer training step"
python3 bench/tracer_overhead.py 40 | sed "s/^/untraced /" >> $B
mkdir -p /tmp/bt2 && STREAMRACE_OUT=/tmp/bt2 LD_PRELOAD=$LIB python3 bench/tracer_overhead.py 40 | sed "s/^/traced /" >> $B
ls -la /tmp/bt2 >> $B
TORCH_CUDA_SANITIZER=1 timeout 200 python3 bench/tracer_overhead.py 15 2>&1 | tail -1 | sed "s/^/torch_cuda_sanitizer /" >> $B
cat $B

cd /tmp && tar czf "$OUT/results.tar.gz" sr_results && ls -la "$OUT"
