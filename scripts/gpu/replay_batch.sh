#!/usr/bin/env bash
# Replay batch for the GPU machine: builds streamrace and the replay GPU executor, then runs
# every ZeRO stage-1/2 variant (none, event, wait-stream, sync) on $GPUS GPUs, one process per
# GPU, twice: with delay injection (a spin of $DELAY_US on the reduction stream before every
# flush; checks for corrupted gradients over $STEPS steps) and without (step time and
# collective/compute overlap: what each fix costs). The CPU verdicts (analyzer on the emitted
# traces, simulator) of the same schedules are recorded next to the GPU ones.
#
# Writes $OUT/replay_results.json and $OUT/replay_results.md (plus per-rank JSON, the IR and
# the emitted traces under $OUT/replay/). Exit 0 when `none` corrupts and every fix is clean
# (the expected outcome), 1 otherwise.
#
# Environment: OUT (required or ./out), GPUS=2, STEPS=1000, COST_STEPS=300, DELAY_US=200,
# DELAY_MODE=fixed|random, PRESET=seed (16 x 1M-element parameters, 1M-element bucket),
# STAGES="1 2", BUILD=<repo>/build-replay-gpu-batch, TRACE=1 to also run each process under
# `streamrace run` when the tracer and that command are built.
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
  mkdir -p "$dir"
  rm -f "$dir/nccl.id" "$dir/nccl.id.tmp"
  local pids=() rcs=0
  for ((r = 0; r < GPUS; r++)); do
    local cmd=("$GPU" --ir "$WORK/ir/stage$stage-$variant-rank$r.json" --rank "$r" --world "$GPUS" --device "$r"
      --id-file "$dir/nccl.id" --steps "$steps" --delay-us "$delay" --delay-mode "$DELAY_MODE"
      --seed "$((r + 1))" --out "$dir/rank$r.json")
    if [ "$TRACE" = 1 ] && "$SR" run --help >/dev/null 2>&1; then
      cmd=("$SR" run -o "$dir/trace" -- "${cmd[@]}")
    fi
    "${cmd[@]}" >"$dir/rank$r.log" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do
    if ! wait "$p"; then rcs=$((rcs + 1)); fi
  done
  echo "   stage $stage $variant ($tag, delay ${delay}us, $steps steps): $rcs rank(s) reported corruption or failed"
}

for stage in $STAGES; do
  echo "== stage $stage: IR and CPU verdicts"
  # The same schedules (with the delay spin ops) as IR JSON, per rank, and the CPU verdicts.
  set +e
  "$SR" replay zero --stage "$stage" --fix all --gpus "$GPUS" --preset "$PRESET" --delay-us "$DELAY_US" \
    --emit-ir "$WORK/ir" --trace-dir "$WORK/traces" --format json >"$WORK/cpu_stage$stage.json"
  set -e
  for variant in $VARIANTS; do
    run_variant "$stage" "$variant" "$DELAY_US" "$STEPS" delay
    run_variant "$stage" "$variant" 0 "$COST_STEPS" cost
  done
done

echo "== results"
python3 - "$WORK" "$OUT" "$STAGES" "$VARIANTS" "$DELAY_US" "$STEPS" "$COST_STEPS" <<'PY'
import json, os, sys
work, out, stages, variants, delay, steps, cost_steps = sys.argv[1:8]
stages = stages.split(); variants = variants.split()
def load(p):
    try:
        with open(p) as f: return json.load(f)
    except Exception as e:
        return {"error": f"{p}: {e}"}
rows, ok = [], True
for st in stages:
    cpu = load(os.path.join(work, f"cpu_stage{st}.json"))
    cpu_by = {v.get("variant"): v for v in cpu.get("variants", [])} if "variants" in cpu else {}
    for v in variants:
        row = {"stage": int(st), "variant": v, "delay_us": int(delay)}
        for tag in ("delay", "cost"):
            ranks = [load(os.path.join(work, f"stage{st}-{v}-{tag}", f"rank{r}.json"))
                     for r in range(64) if os.path.exists(os.path.join(work, f"stage{st}-{v}-{tag}", f"rank{r}.json"))]
            row[tag] = ranks
        d, c = row["delay"], row["cost"]
        row["ranks"] = len(d)
        row["corrupt_steps"] = sum(r.get("corrupt_steps", 0) for r in d)
        row["corrupt_elements"] = sum(r.get("corrupt_elements", 0) for r in d)
        row["steps"] = max([r.get("steps", 0) for r in d] or [0])
        row["step_ms"] = max([r.get("step_ms_mean", 0) for r in c] or [0])
        row["step_ms_p50"] = max([r.get("step_ms_p50", 0) for r in c] or [0])
        row["collective_ms"] = max([r.get("collective_ms_mean", 0) for r in c] or [0])
        row["overlap_pct"] = min([r.get("overlap_pct_mean", 0) for r in c] or [0])
        a = cpu_by.get(v, {}).get("analyzer", {})
        row["analyzer_certain"], row["analyzer_possible"] = a.get("certain"), a.get("possible")
        s = cpu_by.get(v, {}).get("simulator", {})
        row["cpu_sim_corrupt_steps"] = s.get("corrupt_steps")
        failed = len(d) == 0 or any("error" in r for r in d + c)
        expect_corrupt = v == "none"
        good = (not failed) and ((row["corrupt_steps"] > 0) == expect_corrupt) and row["steps"] >= int(steps)
        row["as_expected"] = good
        ok &= good
        rows.append(row)
res = {"schema": "streamrace-replay-batch", "version": 1, "delay_us": int(delay), "steps": int(steps),
       "cost_steps": int(cost_steps), "rows": rows, "as_expected": ok}
with open(os.path.join(out, "replay_results.json"), "w") as f: json.dump(res, f, indent=2)
base = {}
for r in rows:
    if r["variant"] == "none": base[r["stage"]] = r["step_ms"]
lines = ["| stage | variant | GPU corrupt steps (delay %sus) | corrupt elements | analyzer certain/possible | CPU sim corrupt steps | step ms (no delay) | vs none | collective ms | overlap %% | as expected |" % delay,
         "|---|---|---|---|---|---|---|---|---|---|---|"]
for r in rows:
    b = base.get(r["stage"]) or 0
    rel = f"{(r['step_ms'] / b - 1) * 100:+.1f}%" if b else "n/a"
    lines.append(f"| {r['stage']} | {r['variant']} | {r['corrupt_steps']}/{r['steps'] * max(r['ranks'], 1)} | {r['corrupt_elements']} | "
                 f"{r['analyzer_certain']}/{r['analyzer_possible']} | {'-' if r['cpu_sim_corrupt_steps'] is None else r['cpu_sim_corrupt_steps']} | {r['step_ms']:.3f} | {rel} | "
                 f"{r['collective_ms']:.3f} | {r['overlap_pct']:.1f} | {'yes' if r['as_expected'] else 'NO'} |")
with open(os.path.join(out, "replay_results.md"), "w") as f: f.write("\n".join(lines) + "\n")
print("\n".join(lines))
sys.exit(0 if ok else 1)
PY
