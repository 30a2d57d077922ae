#!/usr/bin/env bash
# CUDA graphs, part 2 (issue #14): the explicit graph API and PyTorch's graph APIs on the GPU
# machine, in ONE call with a global deadline (DEADLINE_S, default 400 s, at most 420):
#   1. builds samples/cuda/graph_explicit.cu with nvcc (sm_90);
#   2. runs each new sample racy and clean under gpu-carry/bin/streamrace run (a timeout per run):
#        graph_explicit_{racy,clean}           samples/cuda/graph_explicit.cu
#        torch_graph_capture_{racy,clean}      samples/torch/graph_capture.py
#        torch_graphed_callables_{racy,clean}  samples/torch/graphed_callables.py
#      and the two graph samples of part 1 again (graph_side_stream, graph_two_branches: their
#      fixtures must not change), each analysed with `analyze -f json=...`, one summary line per
#      run: exit codes, findings (kind, confidence, both ops), notices, unanalysed graph launches
#      (a partial verdict);
#   3. runs bench/graph_overhead.py (a captured MLP training step replayed 200 times per round,
#      untraced / streamrace / STREAMRACE_STACKS=none, 3 interleaved rounds) in what time is left.
# Writes at most 6 files under $OUT: machine.txt, summary.txt, results.tar.gz (sr_results/traces/
# <case>/*.srace, sr_results/logs/), graph_overhead.md, graph_overhead_runs.jsonl, batch.log.
#
#   bash scripts/gpu/graph_batch2.sh        # device run, carry ["gpu-carry"]; OVERHEAD=0 skips step 3
#
# Fixtures the lead makes from its output (here, on the CPU machine, after the run):
#   ONLY='graph_explicit|torch_graph' RECORDED="run N (graph_batch2.sh, <date>)" \
#     COMMAND=scripts/gpu/graph_batch2.sh scripts/gpu/record_fixtures.sh results.tar.gz build/bin/streamrace
# which copies these cases of samples/cuda/expected_findings.json from the tarball:
#   tests/data/gpu/graph_explicit_racy/           tests/data/gpu/graph_explicit_clean/
#   tests/data/gpu/torch_graph_capture_racy/      tests/data/gpu/torch_graph_capture_clean/
#   tests/data/gpu/torch_graphed_callables_racy/  tests/data/gpu/torch_graphed_callables_clean/
# (graph_side_stream_* and graph_two_branches_* are re-recorded for comparison only, left out by
# ONLY: the committed run-5 fixtures stay; their summary lines must match them), prints the
# analyzer's findings next to the expectations (the six new entries are "unconfirmed"), then
# `tests/update_expected.sh --update '*gpu_graph_explicit*' '*gpu_torch_graph*'` writes the
# expected reports; review the diff, drop "unconfirmed" from entries the recording confirms,
# and add a run row to tests/data/gpu/README.md.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 PYTHONUNBUFFERED=1
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$REPO" || exit 2
OUT=${OUT:-/tmp/graph2_out}
T0=$(date +%s)
DEADLINE_S=${DEADLINE_S:-400}
(( DEADLINE_S > 420 )) && DEADLINE_S=420
SR="$REPO/gpu-carry/bin/streamrace"
W=/tmp/graph2_work
R="$W/sr_results"
rm -rf "$W" && mkdir -p "$W/bin" "$R/traces" "$R/logs" "$OUT"
exec > >(tee "$OUT/batch.log") 2>&1
left() { echo $(( DEADLINE_S - ($(date +%s) - T0) )); }
{
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  nvcc --version | tail -1
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
  echo "carry: $(cat gpu-carry/COMMIT 2>/dev/null || echo 'no gpu-carry/COMMIT')"
} > "$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"
[ -x "$SR" ] || { echo "no $SR: build gpu-carry with scripts/gpu/build_carry.sh and carry it"; exit 2; }

pids=()
for b in graph_explicit graph_side_stream graph_two_branches; do
  timeout 150 nvcc -O2 -arch=sm_90 -std=c++17 -cudart shared -o "$W/bin/$b" samples/cuda/$b.cu \
    -Xlinker -rpath,/usr/local/cuda/lib64 > "$R/logs/$b.nvcc.log" 2>&1 &
  pids+=($!)
done
# Wait for the compilers only: a bare `wait` also waits for the `tee` of the process substitution
# above, which never ends (it hung the whole call on the GPU machine, 2026-12-01).
wait "${pids[@]}"
for b in graph_explicit graph_side_stream graph_two_branches; do
  [ -x "$W/bin/$b" ] || { echo "$b: nvcc failed:"; tail -5 "$R/logs/$b.nvcc.log"; }
done

# run_case NAME TIMEOUT CMD...: trace, analyse, one summary line.
run_case() {
  local n=$1 t=$2; shift 2
  if (( $(left) < t + 20 )); then
    echo "$n: skipped (deadline: $(left) s left)" >> "$OUT/summary.txt"
    return
  fi
  timeout -k 5 "$t" "$SR" run --no-color -o "$R/traces/$n" -- "$@" > "$R/logs/$n.run.log" 2>&1
  local rc=$?
  timeout -k 5 60 "$SR" analyze --no-color -f "json=$R/logs/$n.json" "$R/traces/$n" > "$R/logs/$n.analyze.txt" 2>&1
  local arc=$?
  python3 - "$n" "$rc" "$arc" "$R/logs/$n.json" >> "$OUT/summary.txt" <<'PY'
import json, sys
n, rc, arc, p = sys.argv[1:5]
try:
    d = json.load(open(p))
except Exception as e:
    print(f"{n}: run rc={rc} analyze rc={arc}: no report ({e})"); sys.exit()
short = {"read-after-write": "RAW", "write-after-read": "WAR", "write-after-write": "WAW"}
fs = [(short.get(f["kind"], f["kind"]), f["confidence"], f["accesses"][0]["op"][:60], f["accesses"][1]["op"][:60],
       f.get("occurrences")) for f in d["findings"]]
s = d["summary"]
print(f"{n}: run rc={rc} analyze rc={arc} findings={fs} unanalysed_graph_launches={s.get('unanalysed_graph_launches')} "
      f"partial={'yes' if s.get('unanalysed_graph_launches') else 'no'} notices={[x['text'][:160] for x in d['notices']]}")
PY
  tail -1 "$OUT/summary.txt"
}

for m in racy clean; do
  [ -x "$W/bin/graph_explicit" ] && run_case graph_explicit_$m 60 "$W/bin/graph_explicit" $m
done
for m in racy clean; do
  run_case torch_graph_capture_$m 90 python3 samples/torch/graph_capture.py $m
  run_case torch_graphed_callables_$m 120 python3 samples/torch/graphed_callables.py $m
done
for b in graph_side_stream graph_two_branches; do
  for m in racy clean; do
    [ -x "$W/bin/$b" ] && run_case ${b}_$m 60 "$W/bin/$b" $m
  done
done
(cd "$W" && tar czf "$OUT/results.tar.gz" sr_results)
echo "--- summary"
cat "$OUT/summary.txt"

if [ "${OVERHEAD:-1}" = 1 ]; then
  budget=$(( $(left) - 15 ))
  if (( budget < 120 )); then
    echo "overhead benchmark skipped: $budget s left"
  else
    timeout -k 5 "$budget" python3 bench/graph_overhead.py --streamrace "$SR" --rounds "${ROUNDS:-3}" \
      --replays "${REPLAYS:-200}" --deadline-s $(( budget - 60 )) --per-run-timeout-s 90 --out "$OUT/graph_overhead.md"
    echo "graph_overhead.py exit $?"
  fi
fi
echo "batch done in $(( $(date +%s) - T0 )) s"
sleep 1  # let tee finish batch.log
