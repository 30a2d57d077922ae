#!/usr/bin/env bash
# Replay batch for the GPU machine: builds streamrace and the replay GPU executor, then runs
# every ZeRO stage-1/2 variant (none, event, wait-stream, sync) on $GPUS GPUs, one process per
# GPU, twice: with delay injection (a spin of $DELAY_US on the reduction stream before every
# flush; checks for corrupted gradients over $STEPS steps) and without (step time and
# collective/compute overlap: what each fix costs). The CPU verdicts (analyzer on the emitted
# traces, simulator) of the same schedules are recorded next to the GPU ones.
#
# Writes $OUT/replay_results.json and $OUT/replay_results.md (plus per-rank JSON, the IR and
# the emitted traces under $OUT/replay/) with scripts/gpu/replay_results.py, after every stage
# (stages not run yet are reported as not run). Exit 0 when `none` corrupts and every fix is clean
# (the expected outcome), 1 otherwise.
#
# Environment: OUT (required or ./out), GPUS=2, STEPS=1000, COST_STEPS=300, DELAY_US=200,
# DELAY_MODE=fixed|random, PRESET=seed (16 x 1M-element parameters, 1M-element bucket),
# STAGES="1 2", BUILD=<repo>/build-replay-gpu-batch, TRACE=1 to add, per variant, a short run
# ($TRACE_STEPS steps, default 40, with the delay) under `streamrace run` that writes the traces
# to stage<S>-<variant>-traced/trace (the delay and cost runs stay untraced, so the tracer
# neither slows the step times nor fills the disk), UNTRACED_SKIP="1" to skip the untraced
# delay/cost runs of the stages listed (their results exist already), DEADLINE_S (default 540):
# no new run starts after that many seconds.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
OUT=${OUT:-$ROOT/out}
GPUS=${GPUS:-2}
STEPS=${STEPS:-1000}
COST_STEPS=${COST_STEPS:-300}
DELAY_US=${DELAY_US:-200}
DELAY_MODE=${DELAY_MODE:-fixed}
PRESET=${PRESET:-seed}
STAGES=${STAGES:-"1 2"}
BUILD=${BUILD:-$ROOT/build-replay-gpu-batch}
TRACE=${TRACE:-0}
TRACE_STEPS=${TRACE_STEPS:-40}
UNTRACED_SKIP=${UNTRACED_SKIP:-}
DEADLINE_S=${DEADLINE_S:-540}
VARIANTS="none event wait-stream sync"
WORK=$OUT/replay
mkdir -p "$WORK"

if [ -n "${PREBUILT_BIN_DIR:-}" ]; then
  # Binaries built on the CPU machine and carried along (saves the build's device time).
  SR=$PREBUILT_BIN_DIR/streamrace
  GPU=$PREBUILT_BIN_DIR/streamrace-replay-gpu
  echo "== prebuilt binaries in $PREBUILT_BIN_DIR"
else
echo "== build ($BUILD)"
  tracer=OFF
  if [ "$TRACE" = 1 ]; then tracer=ON; fi
  cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DSTREAMRACE_BUILD_TESTS=OFF \
    -DSTREAMRACE_BUILD_TRACER=$tracer -DSTREAMRACE_BUILD_REPLAY_GPU=ON >"$WORK/cmake.log" 2>&1 ||
    { cat "$WORK/cmake.log"; exit 2; }
  targets="streamrace streamrace-replay-gpu"
  cmake --build "$BUILD" --target $targets -j"$(nproc)" >"$WORK/build.log" 2>&1 || { tail -50 "$WORK/build.log"; exit 2; }
  SR=$BUILD/bin/streamrace
  GPU=$BUILD/bin/streamrace-replay-gpu
fi
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$WORK/gpus.txt" || true

run_variant() {  # stage variant delay_us steps tag
  local stage=$1 variant=$2 delay=$3 steps=$4 tag=$5
  local dir=$WORK/stage$stage-$variant-$tag
  if [ "$SECONDS" -ge "$DEADLINE_S" ]; then
    echo "   stage $stage $variant ($tag): not started, past the batch deadline (${DEADLINE_S}s)"
    return 0
  fi
  mkdir -p "$dir"
  rm -f "$dir/nccl.id" "$dir/nccl.id.tmp"
  local pids=() rcs=0
  for ((r = 0; r < GPUS; r++)); do
    local cmd=("$GPU" --ir "$WORK/ir/stage$stage-$variant-rank$r.json" --rank "$r" --world "$GPUS" --device "$r"
      --id-file "$dir/nccl.id" --steps "$steps" --delay-us "$delay" --delay-mode "$DELAY_MODE"
      --seed "$((r + 1))" --out "$dir/rank$r.json")
    if [ "$tag" = traced ]; then
      cmd=("$SR" run -o "$dir/trace" -- "${cmd[@]}")
    fi
    timeout -k 5 120 "${cmd[@]}" >"$dir/rank$r.log" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do
    if ! wait "$p"; then rcs=$((rcs + 1)); fi
  done
  echo "   stage $stage $variant ($tag, delay ${delay}us, $steps steps): $rcs rank(s) reported corruption or failed"
}

results() {  # written after every stage, so a batch cut short still leaves the stages it finished
  local os=""
  os=$( (. /etc/os-release && echo "$PRETTY_NAME") 2>/dev/null || true)
  python3 "$ROOT/scripts/gpu/replay_results.py" "$WORK" "$OUT" "$STAGES" "$VARIANTS" "$DELAY_US" "$STEPS" "$COST_STEPS" \
    --machine "os=$os" --machine "date=$(date -u +%Y-%m-%dT%H:%MZ)" \
    --machine "nvidia-smi=$(nvidia-smi 2>/dev/null | grep -o 'CUDA Version: [0-9.]*' | head -1)"
}

for stage in $STAGES; do
  echo "== stage $stage: IR and CPU verdicts"
  # The same schedules (with the delay spin ops) as IR JSON, per rank, and the CPU verdicts.
  set +e
  "$SR" replay zero --stage "$stage" --fix all --gpus "$GPUS" --preset "$PRESET" --delay-us "$DELAY_US" \
    --emit-ir "$WORK/ir" --trace-dir "$WORK/traces" --format json >"$WORK/cpu_stage$stage.json"
  set -e
  for variant in $VARIANTS; do
    if [ "$TRACE" = 1 ]; then run_variant "$stage" "$variant" "$DELAY_US" "$TRACE_STEPS" traced; fi
    case " $UNTRACED_SKIP " in *" $stage "*) continue ;; esac
    run_variant "$stage" "$variant" "$DELAY_US" "$STEPS" delay
    run_variant "$stage" "$variant" 0 "$COST_STEPS" cost
  done
  results >/dev/null || true
done

echo "== results"
results  # scripts/gpu/replay_results.py (also re-runnable on a copied-back $OUT/replay)
