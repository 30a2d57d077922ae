#!/usr/bin/env bash
# Precise mode's exit path on the GPU machine (issue #13): REPEAT (default 5) rounds of every
# case of samples/precise/torch_views.py under `streamrace run --precise=all`, each checked for
# the program's own exit status (0; `--error-exitcode 0`, so findings do not change it), a
# complete trace (end marker: "complete": true in the JSON report), no "terminate called" in
# its output, and the findings its case predicts (racy: 1 certain; clean: none).
#
#   bash scripts/gpu/precise_exit_batch.sh      # carry gpu-carry; writes $OUT/precise_exit.{txt,tsv}
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 PYTHONUNBUFFERED=1
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$REPO" || exit 2
OUT=${OUT:-/tmp/precise_exit}
REPEAT=${REPEAT:-5}
T0=$(date +%s)
DEADLINE_S=${DEADLINE_S:-420}
SR="$REPO/gpu-carry/bin/streamrace"
W=/tmp/precise_exit_work
rm -rf "$W" && mkdir -p "$W" "$OUT"
{
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  python3 -c 'import torch, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)'
  cat gpu-carry/COMMIT
} > "$OUT/machine.txt" 2>&1
printf 'round\tcase\trun_rc\tcomplete\tterminate\tfindings\tcertain\twall_s\tverdict\n' > "$OUT/precise_exit.tsv"
declare -A WANT=([views_racy]=1 [views_clean]=0 [raw_racy]=1 [raw_clean]=0 [readread]=0 [disjoint]=0)
for ((r = 1; r <= REPEAT; r++)); do
  for c in views_racy views_clean raw_racy raw_clean readread disjoint; do
    (( $(date +%s) - T0 > DEADLINE_S - 20 )) && { echo "deadline: stopped before round $r $c" >> "$OUT/precise_exit.txt"; break 2; }
    d="$W/r$r-$c"
    t0=$(date +%s.%N)
    timeout -k 5 60 "$SR" run --no-color --error-exitcode 0 --precise=all -o "$d" -- python3 samples/precise/torch_views.py $c \
      > "$d.log" 2>&1
    rc=$?
    wall=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')
    "$SR" analyze --no-color -f "json=$d.json" "$d" > /dev/null 2>&1
    line=$(python3 - "$d.json" "$d.log" "${WANT[$c]}" <<'PY'
import json, sys
path, log, want = sys.argv[1], sys.argv[2], int(sys.argv[3])
try:
    d = json.load(open(path))
except Exception:
    print("no\t?\t?\t?"); sys.exit()
complete = all(t["complete"] for t in d["traces"]) and len(d["traces"]) > 0
term = "terminate called" in open(log, errors="replace").read()
n = len(d["findings"]); cert = sum(f["confidence"] == "certain" for f in d["findings"])
print(f"{'yes' if complete else 'no'}\t{'yes' if term else 'no'}\t{n}\t{cert}\t{want}")
PY
)
    IFS=$'\t' read -r complete term n cert want <<<"$line"
    verdict=ok
    [[ $rc == 0 && $complete == yes && $term == no && $n == "$want" && $cert == "$want" ]] || verdict=FAIL
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$c" "$rc" "$complete" "$term" "$n" "$cert" "$wall" "$verdict" >> "$OUT/precise_exit.tsv"
    [[ $verdict == FAIL ]] && tail -n 5 "$d.log" | sed "s/^/  r$r $c: /" >> "$OUT/precise_exit.txt"
  done
done
python3 - "$OUT/precise_exit.tsv" >> "$OUT/precise_exit.txt" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
ok = sum(r["verdict"] == "ok" for r in rows)
print(f"{len(rows)} precise-mode runs, {ok} ok, {len(rows) - ok} failed")
PY
cat "$OUT/precise_exit.txt"
