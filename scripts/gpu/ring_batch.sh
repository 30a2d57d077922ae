#!/usr/bin/env bash
# Ring mode and step windows on the GPU machine (issue #17, docs/long-runs.md): the NVTX step
# marker end to end (the library as NVTX's injection, handing NVTX on to CUPTI), in ONE call
# with a global deadline (DEADLINE_S, default 90 s):
#   samples/torch/ring_steps.py racy   under run --ring 4 --step-range step   (race in step 47: found)
#   samples/torch/ring_steps.py clean  under run --ring 4 --step-range step   (none)
#   samples/torch/ring_steps.py racy   under run --steps 10:20 --step-range step (outside: none)
# each analysed with `analyze -f json=...`; one summary line per run: exit codes, findings,
# notices, the ring's header counts. Writes $OUT/ring_summary.txt and $OUT/ring_results.tar.gz
# (sr_results/traces/<case>/, sr_results/logs/), laid out for scripts/gpu/record_fixtures.sh.
#
#   bash scripts/gpu/ring_batch.sh        # device run, carry ["gpu-carry"]
set -u
export PYTHONUNBUFFERED=1
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$REPO" || exit 2
OUT=${OUT:-/tmp/ring_out}
T0=$(date +%s)
DEADLINE_S=${DEADLINE_S:-90}
SR="$REPO/gpu-carry/bin/streamrace"
W=/tmp/ring_work
R="$W/sr_results"
rm -rf "$W" && mkdir -p "$R/traces" "$R/logs" "$OUT"
S="$OUT/ring_summary.txt"
: > "$S"
left() { echo $(( DEADLINE_S - ($(date +%s) - T0) )); }
echo "carry: $(cat gpu-carry/COMMIT 2>/dev/null || echo none)" >> "$S"
run_case() {  # NAME FLAGS MODE
  local n=$1 flags=$2 mode=$3
  if (( $(left) < 30 )); then echo "$n: skipped (deadline)" >> "$S"; return; fi
  # shellcheck disable=SC2086
  timeout -k 5 60 "$SR" run --no-color $flags -o "$R/traces/$n" -- python3 samples/torch/ring_steps.py "$mode" \
    > "$R/logs/$n.run.log" 2>&1
  local rc=$?
  timeout -k 5 30 "$SR" analyze --no-color -f "json=$R/logs/$n.json" "$R/traces/$n" > "$R/logs/$n.analyze.txt" 2>&1
  local arc=$?
  python3 - "$n" "$rc" "$arc" "$R/logs/$n.json" >> "$S" <<'PY'
import json, sys
n, rc, arc, p = sys.argv[1:5]
try:
    d = json.load(open(p))
except Exception as e:
    print(f"{n}: run rc={rc} analyze rc={arc}: no report ({e})"); sys.exit()
fs = [(f["kind"], f["confidence"], f["accesses"][0]["op"], f["accesses"][1]["op"], f.get("occurrences"),
       [(fr["file"].split("/")[-1], fr["line"]) for fr in f["accesses"][1].get("stack", [])[:1]]) for f in d["findings"]]
print(f"{n}: run rc={rc} analyze rc={arc} findings={fs} notices={[x['text'][:200] for x in d['notices']]}")
PY
  tail -1 "$S"
}
run_case ring_steps_ring_racy "--ring 4 --step-range step" racy
run_case ring_steps_ring_clean "--ring 4 --step-range step" clean
run_case ring_steps_window_racy "--steps 10:20 --step-range step" racy
(cd "$W" && tar czf "$OUT/ring_results.tar.gz" sr_results)
echo "ring batch done in $(( $(date +%s) - T0 )) s" >> "$S"
