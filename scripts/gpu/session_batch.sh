#!/usr/bin/env bash
# Everything one GPU session needs in one call on nvidia-h200-x2, in priority order, inside a
# global deadline: the tracer's CUDA and PyTorch samples (issue 3 fixtures), the DeepSpeed
# seed runs under the tracer (issue 6), then the tracer overhead benchmark.
#   carry: gpu-carry (bin/streamrace, lib/libstreamrace.so built on the CPU machine), .whl
#   run:   DEADLINE=540 bash scripts/gpu/session_batch.sh
# Output under $OUT: results.tar.gz (samples), logs.tgz + traces-*.tar.* (DeepSpeed),
# overhead.tar.gz, session.log.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
T0=$SECONDS
DEADLINE=${DEADLINE:-540}
left() { echo $((DEADLINE - (SECONDS - T0))); }
exec > >(tee "$OUT/session.log") 2>&1
echo "== session batch, deadline ${DEADLINE}s"

# DeepSpeed installs only use the CPU: do them while the samples run.
(timeout -k 5 150 bash samples/deepspeed/setup_env.sh > /tmp/ds_setup.log 2>&1; echo "setup rc=$?" >> /tmp/ds_setup.log) &
setup_pid=$!

echo "== tracer samples ($(left)s left)"
SKIP_OVERHEAD=1 OUT="$OUT" timeout -k 5 200 bash scripts/gpu/tracer_batch.sh > /tmp/tracer_batch.log 2>&1
echo "tracer batch rc=$? at $((SECONDS - T0))s"
tail -40 /tmp/tracer_batch.log
cat /tmp/sr_results/logs/summary.txt 2>/dev/null

wait "$setup_pid"
tail -3 /tmp/ds_setup.log
echo "== DeepSpeed ($(left)s left)"
budget=$(( $(left) - 130 ))
(( budget > 240 )) && budget=240
if (( budget >= 60 )); then
  OUT="$OUT" BUDGET_S=$budget SKIP_MODES="csan" MAX_TRACE_FILES=4 STREAMRACE_BIN="$PWD/gpu-carry/bin/streamrace" \
    ONLY="z1_0142 z1_0142_patch z1_0143 seed002 z3_0142 z3_0143" \
    timeout -k 5 $((budget + 60)) bash scripts/gpu/deepspeed_batch.sh > /tmp/ds_batch.log 2>&1
  echo "deepspeed batch rc=$? at $((SECONDS - T0))s"
  tail -30 /tmp/ds_batch.log
fi

echo "== overhead ($(left)s left)"
if (( $(left) > 45 )); then
  LIB=$PWD/gpu-carry/lib/libstreamrace.so
  B=/tmp/overhead
  mkdir -p $B /tmp/bt /tmp/bt2
  {
    for i in 1 2 3; do
      /tmp/sr_samples/launch_bench 100000 | sed "s/^/untraced /"
      STREAMRACE_OUT=/tmp/bt LD_PRELOAD=$LIB /tmp/sr_samples/launch_bench 100000 | sed "s/^/traced_native_stacks /"
      STREAMRACE_STACKS=none STREAMRACE_OUT=/tmp/bt LD_PRELOAD=$LIB /tmp/sr_samples/launch_bench 100000 | sed "s/^/traced_no_stacks /"
    done
    python3 bench/tracer_overhead.py 30 | sed "s/^/untraced /"
    STREAMRACE_OUT=/tmp/bt2 LD_PRELOAD=$LIB python3 bench/tracer_overhead.py 30 | sed "s/^/traced /"
    (( $(left) > 25 )) && TORCH_CUDA_SANITIZER=1 timeout 30 python3 bench/tracer_overhead.py 10 2>&1 | tail -1 | sed "s/^/torch_cuda_sanitizer /"
    ls -la /tmp/bt /tmp/bt2
  } > $B/bench.txt 2>&1
  cat $B/bench.txt | tail -25
  tar czf "$OUT/overhead.tar.gz" -C /tmp overhead
fi
echo "== done at $((SECONDS - T0))s"
ls -la "$OUT"
