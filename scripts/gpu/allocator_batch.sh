#!/usr/bin/env bash
# PyTorch caching-allocator blocks on the GPU machine (issue #11): the allocator sample
# (samples/torch/record_stream.py racy|record|wait), the two-stream sample, and the realistic
# jobs (GPT-2 124M under DeepSpeed ZeRO-2 and FSDP2, one rank, a few steps; the allocator's
# backends and expandable segments), each traced by `streamrace run` and analysed there; then
# interleaved overhead rounds of the ZeRO-2 job (untraced, streamrace, noblocks).
#
#   bash scripts/gpu/allocator_batch.sh      # carry gpu-carry and .whl; writes $OUT/
#
# Env: OUT (default /tmp/allocator_out), DEADLINE_S (default 560: whole script), STEPS (3),
# OVERHEAD=0 skips the overhead rounds, ROUNDS (3), ONLY (a regex: run only the cases it matches).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$REPO" || exit 2
OUT=${OUT:-/tmp/allocator_out}
T0=$(date +%s)
DEADLINE_S=${DEADLINE_S:-560}
STEPS=${STEPS:-3}
SR="$REPO/gpu-carry/bin/streamrace"
W=/tmp/allocator_work
rm -rf "$W" && mkdir -p "$W/traces" "$W/logs" "$OUT"
left() { echo $((T0 + DEADLINE_S - $(date +%s))); }

{
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  python3 -c 'import torch, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version())'
  cat gpu-carry/COMMIT
} > "$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"

eval "$(bash samples/realistic/setup_env.sh --print-env)" > "$W/logs/setup_env.log" 2>&1
python3 -c 'import deepspeed; print("deepspeed", deepspeed.__version__)' >> "$OUT/machine.txt" 2>&1
python3 -c 'import transformers; print("transformers", transformers.__version__)' >> "$OUT/machine.txt" 2>&1

# case NAME TIMEOUT ENV... -- CMD...: traced run into $W/traces/NAME, analysed into $W/logs/NAME.json
case_run() {
  local name=$1 t=$2; shift 2
  local envs=() flags=()
  while [ "$1" != "--" ]; do
    if [[ $1 == --* ]]; then flags+=("$1"); else envs+=("$1"); fi
    shift
  done
  shift
  if [ -n "${ONLY:-}" ] && ! [[ $name =~ $ONLY ]]; then return; fi
  local l; l=$(left)
  if (( l < t + 20 )); then echo "$name: skipped (deadline)" | tee -a "$OUT/summary.txt"; return; fi
  local t_start; t_start=$(date +%s.%N)
  env "${envs[@]}" timeout -k 10 "$t" "$SR" run --no-color "${flags[@]}" -o "$W/traces/$name" -- "$@" > "$W/logs/$name.run.log" 2>&1
  local rc=$?
  local verdict_dir="$W/traces/$name"
  [ -d "$verdict_dir/confirm" ] && verdict_dir="$verdict_dir/confirm"
  local wall; wall=$(awk -v a="$t_start" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')
  "$SR" analyze --no-color --format "json=$W/logs/$name.json" "$verdict_dir" > "$W/logs/$name.analyze.txt" 2>&1
  local arc=$?
  python3 - "$name" "$rc" "$arc" "$wall" "$W/logs/$name.json" >> "$OUT/summary.txt" <<'PY'
import json, sys, collections
name, rc, arc, wall, path = sys.argv[1:6]
try:
    d = json.load(open(path))
except Exception as e:
    print(f"{name}: run rc={rc} analyze rc={arc} wall={wall}s: no report ({e})"); sys.exit()
c = collections.Counter((f["kind"], f["confidence"]) for f in d["findings"])
notes = [n["text"][:140] for n in d["notices"] if "allocator" in n["text"]]
print(f"{name}: run rc={rc} analyze rc={arc} wall={wall}s findings={len(d['findings'])} {dict(c)} records={d['summary']['records']} notices={notes}")
for f in d["findings"][:6]:
    a, b = f["accesses"]
    print(f"   {f['kind']} {f['confidence']}: {a['op'][:60]} [{a['allocation']['kind']} {a['bytes']}B] vs {b['op'][:60]} [{b['allocation']['kind']} {b['bytes']}B] overlap {f['overlap']['bytes']}B")
PY
  tail -n 2 "$OUT/summary.txt"
}

for m in racy record wait; do
  case_run torch_record_stream_$m 90 X=1 -- python3 samples/torch/record_stream.py $m
done
for m in racy clean; do
  case_run torch_two_streams_$m 90 X=1 -- python3 samples/torch/two_streams.py $m
done
case_run zero2 200 X=1 -- python3 samples/realistic/gpt2_zero2.py --steps "$STEPS" --warmup 1
case_run zero2_noblocks 200 STREAMRACE_TORCH_ALLOCATOR=0 -- python3 samples/realistic/gpt2_zero2.py --steps "$STEPS" --warmup 1
case_run fsdp2 200 X=1 -- python3 samples/realistic/gpt2_fsdp2.py --steps "$STEPS" --warmup 1
case_run zero2_expandable 200 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True -- python3 samples/realistic/gpt2_zero2.py --steps "$STEPS" --warmup 1
case_run fsdp2_mallocasync 200 PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync -- python3 samples/realistic/gpt2_fsdp2.py --steps "$STEPS" --warmup 1

# --confirm: a default run, then precise mode on the kernels behind its possible findings.
for m in views_racy disjoint views_clean; do
  case_run confirm_torch_$m 150 --confirm -- python3 samples/precise/torch_views.py $m
done
case_run confirm_zero2_noblocks 300 --confirm --torch-allocator=0 -- python3 samples/realistic/gpt2_zero2.py --steps "$STEPS" --warmup 1
case_run zero2_untimed_baseline 200 STREAMRACE_DISABLE=1 -- python3 samples/realistic/gpt2_zero2.py --steps "$STEPS" --warmup 1
for n in confirm_torch_views_racy confirm_torch_disjoint confirm_zero2_noblocks; do
  grep -E "^streamrace: --confirm|^  (confirmed|gone|still possible)|^SUMMARY|median_step_ms" "$W/logs/$n.run.log" 2>/dev/null | sed "s/^/$n: /" >> "$OUT/summary.txt"
done

(cd "$W" && tar czf "$OUT/traces.tar.gz" traces && tar czf "$OUT/logs.tar.gz" logs)
ls -la "$OUT"

if [ "${OVERHEAD:-1}" = 1 ] && (( $(left) > 150 )); then
  OUT="$OUT/overhead" DEADLINE_S=$(( $(left) - 15 )) ROUNDS=${ROUNDS:-3} JOBS=zero2 CONFIGS="untraced streamrace noblocks" \
    SKIP_DS_SETUP=1 STREAMRACE="$SR" bash bench/realistic_overhead.sh > "$W/logs/overhead.log" 2>&1
  tail -n 30 "$OUT/overhead/realistic_overhead.md" 2>/dev/null
fi
cat "$OUT/summary.txt"
