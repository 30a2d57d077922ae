#!/usr/bin/env bash
# CUDA graphs, part 3 (issue #14), ONE call with a global deadline (DEADLINE_S, default 240 s):
#   1. builds samples/cuda/graph_nccl_allreduce.cu (an NCCL all-reduce captured into a graph,
#      one GPU, one rank) with nvcc against the toolkit's or PyTorch's NCCL;
#   2. runs it racy and clean, and samples/torch/graph_capture.py and graphed_callables.py
#      racy and clean again (the graph launch's Python stack is now taken: a graph node's
#      findings show it beside the capture's), each under gpu-carry/bin/streamrace run (a timeout
#      per run), analysed with `analyze -f json=...`: one summary line per run with the findings
#      (kind, confidence, both ops), whether the graph launch had a stack, unanalysed launches.
# Writes under $OUT: machine.txt, summary.txt, results.tar.gz (sr_results/traces/<case>/*.srace,
# sr_results/logs/), batch.log.
#
#   bash scripts/gpu/graph_batch3.sh        # device run, carry ["gpu-carry"]
#
# Fixtures from its output (on the CPU machine):
#   ONLY='graph_nccl|torch_graph' RECORDED="run N (graph_batch3.sh, <date>)" \
#     COMMAND=scripts/gpu/graph_batch3.sh scripts/gpu/record_fixtures.sh results.tar.gz build/bin/streamrace
# then `tests/update_expected.sh --update '*gpu_graph_nccl*' '*gpu_torch_graph*'`, review, and a
# run row in tests/data/gpu/README.md.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 PYTHONUNBUFFERED=1
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$REPO" || exit 2
OUT=${OUT:-/tmp/graph3_out}
T0=$(date +%s)
DEADLINE_S=${DEADLINE_S:-240}
SR="$REPO/gpu-carry/bin/streamrace"
W=/tmp/graph3_work
R="$W/sr_results"
rm -rf "$W" && mkdir -p "$W/bin" "$R/traces" "$R/logs" "$OUT"
: > "$OUT/summary.txt"
left() { echo $(( DEADLINE_S - ($(date +%s) - T0) )); }
{
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  nvcc --version | tail -1
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version())'
  echo "carry: $(cat gpu-carry/COMMIT 2>/dev/null || echo 'no gpu-carry/COMMIT')"
} > "$OUT/machine.txt" 2>&1
[ -x "$SR" ] || { echo "no $SR: build gpu-carry with scripts/gpu/build_carry.sh and carry it" | tee -a "$OUT/summary.txt"; exit 2; }

NCCL_INC=""; NCCL_LIBDIR=""
for d in /usr/local/cuda/include /usr/include; do [ -f $d/nccl.h ] && NCCL_INC=$d && break; done
PYNCCL=$(python3 -c 'import nvidia.nccl, os; print(list(nvidia.nccl.__path__)[0])' 2>/dev/null)
[ -z "$NCCL_INC" ] && [ -n "$PYNCCL" ] && NCCL_INC=$PYNCCL/include
for d in /usr/local/cuda/lib64 /usr/lib/x86_64-linux-gnu "$PYNCCL/lib"; do ls $d/libnccl.so* >/dev/null 2>&1 && NCCL_LIBDIR=$d && break; done
NCCL_LINKDIR=$NCCL_LIBDIR
if [ ! -e "$NCCL_LIBDIR/libnccl.so" ]; then mkdir -p "$W/ncclink" && ln -sf "$NCCL_LIBDIR"/libnccl.so.2 "$W/ncclink/libnccl.so"; NCCL_LINKDIR=$W/ncclink; fi
echo "nccl include=$NCCL_INC lib=$NCCL_LIBDIR" >> "$OUT/machine.txt"
timeout 150 nvcc -O2 -arch=sm_90 -std=c++17 -cudart shared -o "$W/bin/graph_nccl_allreduce" samples/cuda/graph_nccl_allreduce.cu \
  -I"$NCCL_INC" -L"$NCCL_LINKDIR" -lnccl -Xlinker -rpath,"$NCCL_LIBDIR" -Xlinker -rpath,/usr/local/cuda/lib64 \
  > "$R/logs/graph_nccl_allreduce.nvcc.log" 2>&1 || { echo "graph_nccl_allreduce: nvcc failed: $(tail -3 "$R/logs/graph_nccl_allreduce.nvcc.log")" >> "$OUT/summary.txt"; }

# run_case NAME TIMEOUT CMD...: trace, analyse, one summary line.
run_case() {
  local n=$1 t=$2; shift 2
  if (( $(left) < t + 15 )); then echo "$n: skipped (deadline: $(left) s left)" >> "$OUT/summary.txt"; return; fi
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
fs = []
for f in d["findings"]:
    acc = f["accesses"]
    launch = [("launch stack " + str([(fr["file"].split("/")[-1], fr["line"]) for fr in a["graph_launch"]["stack"][:2]])
               if a["graph_launch"].get("stack") else "launch without stack") for a in acc if a.get("graph_launch")]
    fs.append((short.get(f["kind"], f["kind"]), f["confidence"], acc[0]["op"][:50], acc[1]["op"][:50], f.get("occurrences"), launch))
s = d["summary"]
print(f"{n}: run rc={rc} analyze rc={arc} findings={fs} unanalysed_graph_launches={s.get('unanalysed_graph_launches')} "
      f"notices={[x['text'][:120] for x in d['notices']]}")
PY
  tail -1 "$OUT/summary.txt"
}
for m in racy clean; do
  [ -x "$W/bin/graph_nccl_allreduce" ] && run_case graph_nccl_allreduce_$m 60 "$W/bin/graph_nccl_allreduce" $m
done
for m in racy clean; do
  run_case torch_graph_capture_$m 60 python3 samples/torch/graph_capture.py $m
  run_case torch_graphed_callables_$m 90 python3 samples/torch/graphed_callables.py $m
done
(cd "$W" && tar czf "$OUT/results.tar.gz" sr_results)
echo "batch done in $(( $(date +%s) - T0 )) s" >> "$OUT/summary.txt"
cat "$OUT/summary.txt"
