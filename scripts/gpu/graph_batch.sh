#!/usr/bin/env bash
# CUDA graphs on the GPU machine (issue #14): the graph samples (samples/cuda/graph_*.cu,
# racy|clean) compiled here with nvcc and traced by `streamrace run`, each analysed; then,
# with OVERHEAD=1 (default), interleaved overhead rounds of the realistic ZeRO-2 job
# (untraced, streamrace, nostacks; STEPS timed steps).
#
#   bash scripts/gpu/graph_batch.sh      # carry gpu-carry (and .whl for the overhead rounds)
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 PYTHONUNBUFFERED=1
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$REPO" || exit 2
OUT=${OUT:-/tmp/graph_out}
T0=$(date +%s)
DEADLINE_S=${DEADLINE_S:-380}
SR="$REPO/gpu-carry/bin/streamrace"
W=/tmp/graph_work
rm -rf "$W" && mkdir -p "$W/bin" "$W/traces" "$W/logs" "$OUT"
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; nvcc --version | tail -1; cat gpu-carry/COMMIT; } > "$OUT/machine.txt" 2>&1
for b in graph_side_stream graph_two_branches; do
  timeout 180 nvcc -O2 -arch=sm_90 -std=c++17 -cudart shared -o "$W/bin/$b" samples/cuda/$b.cu \
    -Xlinker -rpath,/usr/local/cuda/lib64 > "$W/logs/$b.nvcc.log" 2>&1 &
done
wait
for b in graph_side_stream graph_two_branches; do
  for m in racy clean; do
    n=${b}_$m
    timeout -k 5 60 "$SR" run --no-color -o "$W/traces/$n" -- "$W/bin/$b" $m > "$W/logs/$n.run.log" 2>&1
    rc=$?
    "$SR" analyze --no-color -f "json=$W/logs/$n.json" "$W/traces/$n" > "$W/logs/$n.analyze.txt" 2>&1
    arc=$?
    python3 - "$n" "$rc" "$arc" "$W/logs/$n.json" >> "$OUT/summary.txt" <<'PY'
import json, sys
n, rc, arc, p = sys.argv[1:5]
try:
    d = json.load(open(p))
except Exception as e:
    print(f"{n}: run rc={rc} analyze rc={arc}: no report ({e})"); sys.exit()
fs = [(f["kind"], f["confidence"], f["accesses"][0]["op"][:40], f["accesses"][1]["op"][:40]) for f in d["findings"]]
print(f"{n}: run rc={rc} analyze rc={arc} findings={fs} graph_launches_unanalysed={d['summary'].get('unanalysed_graph_launches')} notices={[x['text'][:100] for x in d['notices']]}")
PY
  done
done
cat "$OUT/summary.txt"
(cd "$W" && tar czf "$OUT/traces.tar.gz" traces logs)
if [ "${OVERHEAD:-1}" = 1 ] && (( $(date +%s) - T0 < DEADLINE_S - 200 )); then
  eval "$(bash samples/realistic/setup_env.sh --print-env)" > /dev/null 2>&1
  OUT="$OUT/overhead" DEADLINE_S=$(( DEADLINE_S - ($(date +%s) - T0) - 10 )) ROUNDS=${ROUNDS:-3} STEPS=${STEPS:-30} WARMUP=5 \
    JOBS=zero2 CONFIGS="untraced streamrace nostacks" SKIP_DS_SETUP=1 STREAMRACE="$SR" \
    bash bench/realistic_overhead.sh > "$W/overhead.log" 2>&1
  sed -n '/## GPT-2/,/## Skipped/p' "$OUT/overhead/realistic_overhead.md"
fi
