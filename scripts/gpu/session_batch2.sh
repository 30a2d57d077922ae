#!/usr/bin/env bash
# Second GPU call of a session: re-records what the tracer's Python-stack change affects
# (PyTorch samples, the DeepSpeed seed runs), runs the replay GPU executor, and measures the
# tracer's overhead on a PyTorch training step. Priority order inside a global deadline.
#   carry: gpu-carry (bin/streamrace, bin/streamrace-replay-gpu, lib/libstreamrace.so), .whl
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
T0=$SECONDS
DEADLINE=${DEADLINE:-420}
left() { echo $((DEADLINE - (SECONDS - T0))); }
exec > >(tee "$OUT/session2.log") 2>&1
SR=$PWD/gpu-carry/bin/streamrace
LIB=$PWD/gpu-carry/lib/libstreamrace.so
W=/tmp/s2
mkdir -p $W/torch $W/logs

(timeout -k 5 150 bash samples/deepspeed/setup_env.sh > $W/logs/ds_setup.log 2>&1; echo "setup rc=$?" >> $W/logs/ds_setup.log) &
setup_pid=$!

echo "== torch samples ($(left)s left)"
run_torch() {  # name mode cmd...
  local name=$1 mode=$2; shift 2
  local dir=$W/torch/${name}_${mode}
  mkdir -p "$dir"
  timeout -k 5 40 "$SR" run --no-color -o "$dir" -- "$@" > "$W/logs/${name}_${mode}.log" 2>&1
  echo "$name $mode rc=$?"
}
for m in racy clean; do
  run_torch torch_two_streams $m python3 samples/torch/two_streams.py $m
  run_torch torch_nccl_allreduce $m python3 -m torch.distributed.run --nproc_per_node=2 samples/torch/nccl_allreduce.py $m
done
grep -h -A3 "^  \(Read\|Write\)" $W/logs/torch_two_streams_racy.log | head -8

wait "$setup_pid"; tail -1 $W/logs/ds_setup.log
echo "== DeepSpeed stage 1 ($(left)s left)"
OUT=$W/ds BUDGET_S=$(( $(left) - 200 )) CAP_S=70 SKIP_MODES="csan plain" MAX_TRACE_FILES=3 STREAMRACE_BIN="$SR" \
  ONLY="z1_0142 z1_0142_patch z1_0143" timeout -k 5 260 bash scripts/gpu/deepspeed_batch.sh > $W/logs/ds_z1.log 2>&1
echo "ds z1 rc=$?"; tail -8 $W/logs/ds_z1.log
mkdir -p $W/ds && cp $W/ds/*.tar.* "$OUT"/ 2>/dev/null; cp $W/ds/logs.tgz "$OUT"/ds_z1_logs.tgz 2>/dev/null

echo "== replay GPU executor ($(left)s left)"
if (( $(left) > 100 )); then
  PREBUILT_BIN_DIR=$PWD/gpu-carry/bin OUT=$W/replay STEPS=1000 COST_STEPS=200 DELAY_US=200 GPUS=2 PRESET=seed \
    timeout -k 5 $(( $(left) - 60 )) bash scripts/gpu/replay_batch.sh > $W/logs/replay.log 2>&1
  echo "replay rc=$?"; tail -25 $W/logs/replay.log
  cp $W/replay/replay_results.* "$OUT"/ 2>/dev/null
fi

echo "== overhead ($(left)s left)"
if (( $(left) > 50 )); then
  mkdir -p /tmp/bt2
  python3 bench/tracer_overhead.py 30 2>&1 | tail -1 | sed "s/^/untraced /" | tee $W/logs/overhead.txt
  STREAMRACE_OUT=/tmp/bt2 LD_PRELOAD=$LIB python3 bench/tracer_overhead.py 30 2>&1 | tail -1 | sed "s/^/traced /" | tee -a $W/logs/overhead.txt
fi

echo "== DeepSpeed stage 3 and seed 002 ($(left)s left)"
if (( $(left) > 60 )); then
  OUT=$W/ds3 BUDGET_S=$(( $(left) - 25 )) CAP_S=55 SKIP_MODES="csan plain" MAX_TRACE_FILES=3 STREAMRACE_BIN="$SR" \
    ONLY="seed002 z3_0142 z3_0143" timeout -k 5 $(( $(left) - 15 )) bash scripts/gpu/deepspeed_batch.sh > $W/logs/ds_z3.log 2>&1
  echo "ds z3 rc=$?"; grep -E "traced" $W/ds3/logs/summary.tsv 2>/dev/null; tar xzf $W/ds3/logs.tgz -C /tmp 2>/dev/null; cat /tmp/logs/summary.tsv 2>/dev/null
  for f in $W/ds3/traces-*.tar.*; do [ -e "$f" ] && cp "$f" "$OUT/ds3-$(basename $f)"; done
fi
tar czf "$OUT/s2.tar.gz" -C /tmp s2/torch s2/logs s2/replay/replay 2>/dev/null || tar czf "$OUT/s2.tar.gz" -C /tmp s2/torch s2/logs
echo "== done at $((SECONDS - T0))s"
ls -la "$OUT"
