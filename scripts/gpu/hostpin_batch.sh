#!/usr/bin/env bash
# One batch on one H200 for --host-accesses (issue #14 item 3, docs/host-accesses.md):
#  1. compiles samples/cuda/pinned_host_reuse.cu with nvcc;
#  2. runs it and samples/torch/pin_memory_reuse.py, racy and clean, untraced and under
#     `streamrace run --host-accesses`; analyses each run's traces (`-f json=...`) and prints
#     one summary line per run: the findings against samples/cuda/expected_findings.json, and
#     whether the program printed the same as untraced;
#  3. times a pinned-copy loop (pinned_host_reuse bench N) untraced, under `run` and under
#     `run --host-accesses`, interleaved rounds, medians and spread.
# Everything goes under $OUT: summary.txt, overhead.txt, hostpin_results.tar.gz (traces,
# logs, reports; laid out as tracer_batch.sh's so record_fixtures.sh can read it).
#
# Expects gpu-carry/{bin/streamrace,lib/libstreamrace.so} from scripts/gpu/build_carry.sh.
# Global deadline DEADLINE_S (default 290 s), a timeout per run; no set -e: one failing run
# is reported and the batch goes on.
set -u
export PYTHONUNBUFFERED=1
START=$(date +%s)
DEADLINE_S=${DEADLINE_S:-290}
ROUNDS=${ROUNDS:-5}
BENCH_ITERS=${BENCH_ITERS:-3000}
REPO=$(pwd)
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
R=/tmp/sr_results
rm -rf "$R" && mkdir -p "$R"/traces "$R"/logs "$R"/reports /tmp/sr_samples
SR="$REPO/gpu-carry/bin/streamrace"
SUMMARY="$OUT/summary.txt"
: >"$SUMMARY"
say() { echo "$*" | tee -a "$SUMMARY"; }
left() { echo $(( DEADLINE_S - ($(date +%s) - START) )); }
# A run's timeout: its own limit, never past the global deadline.
limit() { local l; l=$(left); [ "$l" -lt "$1" ] && echo $(( l > 5 ? l : 5 )) || echo "$1"; }

say "== machine"
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader 2>&1 | tee -a "$SUMMARY"
nvcc --version 2>&1 | tail -1 | tee -a "$SUMMARY"
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1 | tee -a "$SUMMARY"
uname -r | tee -a "$SUMMARY"
"$SR" --version 2>&1 | tee -a "$SUMMARY"
[ -f gpu-carry/COMMIT ] && say "carry commit $(cat gpu-carry/COMMIT)"

say "== build"
timeout 120 nvcc -O2 -arch=sm_90 -std=c++17 -cudart shared -o /tmp/sr_samples/pinned_host_reuse \
  samples/cuda/pinned_host_reuse.cu -Xlinker -rpath,/usr/local/cuda/lib64 >"$R/logs/nvcc.log" 2>&1
say "nvcc rc=$? ($(ls /tmp/sr_samples))"

# The program's own output lines (the tracer's report also goes to stdout under `run`).
program_lines() { grep -E '^(h2d:|d2h:|pinned_host_reuse |pin_memory_reuse.py )' "$1" 2>/dev/null; }

case_run() {  # case mode cmd...
  local name=$1 mode=$2; shift 2
  local c="${name}_${mode}" dir="$R/traces/${name}_${mode}"
  if [ "$(left)" -lt 20 ]; then say "$c: skipped (global deadline)"; return; fi
  mkdir -p "$dir"
  timeout -k 5 "$(limit 60)" "$@" >"$R/logs/${c}.untraced.log" 2>&1
  local urc=$?
  local t0=$(date +%s)
  timeout -k 5 "$(limit 90)" "$SR" run --no-color --host-accesses -o "$dir" -- "$@" >"$R/logs/${c}.log" 2>&1
  local rc=$? secs=$(( $(date +%s) - t0 ))
  "$SR" analyze --no-color -f "json=$R/reports/${c}.json" -f text "$dir" >"$R/reports/${c}.txt" 2>&1
  local arc=$?
  local same=no
  [ "$(program_lines "$R/logs/${c}.untraced.log")" == "$(program_lines "$R/logs/${c}.log")" ] &&
    [ -n "$(program_lines "$R/logs/${c}.log")" ] && same=yes
  local verdict
  verdict=$(python3 - "$c" "$R/reports/${c}.json" "$dir" <<'PY'
import glob, json, os, sys
case, report, tdir = sys.argv[1:4]
exp = json.load(open("samples/cuda/expected_findings.json")).get(case)
short = {"read-after-write": "RAW", "write-after-read": "WAR", "write-after-write": "WAW",
         "host-write-during-copy": "HWC", "host-read-during-copy": "HRC", "use-after-reuse": "UAR"}
try:
    d = json.load(open(report))
except Exception as e:  # noqa: BLE001 - say what is wrong and go on
    print(f"report unreadable ({e})"); sys.exit()
got = sorted({(short.get(f["kind"], f["kind"]), f["confidence"], f["accesses"][0]["op"], f["accesses"][1]["op"])
              for f in d["findings"]})
want = sorted({(f["kind"], f["confidence"], f["earlier_op"], f["later_op"]) for f in exp["findings"]}) if exp else None
traces = len(glob.glob(os.path.join(tdir, "*.srace")))
notes = [n["text"] for n in d.get("notices", []) if n["text"].startswith("host accesses:")]
occ = sum(f["occurrences"] for f in d["findings"])
match = "no expectation" if want is None else ("MATCH" if got == want else f"MISMATCH want={want}")
print(f"traces={traces} findings={got} occurrences={occ} {match} | {notes[0] if notes else 'no host-access notice'}")
PY
)
  say "$c: untraced rc=$urc traced rc=$rc secs=$secs analyze rc=$arc output_unchanged=$same $verdict"
  say "   untraced: $(program_lines "$R/logs/${c}.untraced.log" | tr '\n' ';')"
  say "   traced:   $(program_lines "$R/logs/${c}.log" | tr '\n' ';')"
}

say "== samples (streamrace run --host-accesses)"
for m in racy clean; do case_run pinned_host_reuse $m /tmp/sr_samples/pinned_host_reuse $m; done
for m in racy clean; do case_run torch_pin_memory_reuse $m python3 samples/torch/pin_memory_reuse.py $m; done

say "== overhead: pinned_host_reuse bench $BENCH_ITERS (1 MiB pinned H2D copy + sync + host write per iteration)"
B="$OUT/overhead.txt"
: >"$B"
mkdir -p /tmp/sr_bench
for i in $(seq 1 "$ROUNDS"); do
  [ "$(left)" -lt 25 ] && { say "overhead: stopped after $((i - 1)) rounds (global deadline)"; break; }
  for variant in untraced run host_accesses; do
    rm -rf /tmp/sr_bench/*
    case $variant in
      untraced) cmd=(/tmp/sr_samples/pinned_host_reuse bench "$BENCH_ITERS") ;;
      run) cmd=("$SR" run --no-color -o /tmp/sr_bench -- /tmp/sr_samples/pinned_host_reuse bench "$BENCH_ITERS") ;;
      host_accesses) cmd=("$SR" run --no-color --host-accesses -o /tmp/sr_bench -- /tmp/sr_samples/pinned_host_reuse bench "$BENCH_ITERS") ;;
    esac
    line=$(timeout -k 5 "$(limit 40)" "${cmd[@]}" 2>&1 | grep -m1 'us_per_iter=')
    echo "round=$i variant=$variant ${line:-FAILED}" >>"$B"
  done
done
python3 - "$B" <<'PY' | tee -a "$SUMMARY"
import re, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    m = re.search(r"variant=(\w+) .*us_per_iter=([\d.]+)", line)
    if m:
        runs.setdefault(m.group(1), []).append(float(m.group(2)))
base = statistics.median(runs["untraced"]) if runs.get("untraced") else None
for v in ("untraced", "run", "host_accesses"):
    xs = runs.get(v, [])
    if not xs:
        print(f"{v}: no result"); continue
    med = statistics.median(xs)
    rel = f" ({(med / base - 1) * 100:+.1f} % vs untraced)" if base else ""
    print(f"{v}: median {med:.2f} us/iter over {len(xs)} rounds, spread {min(xs):.2f}..{max(xs):.2f}{rel}")
if runs.get("run") and runs.get("host_accesses"):
    r, h = statistics.median(runs["run"]), statistics.median(runs["host_accesses"])
    print(f"--host-accesses adds {h - r:.2f} us/iter ({(h / r - 1) * 100:+.1f} %) to run")
PY
cat "$B" >>"$R/logs/overhead_raw.txt"

say "== done in $(( $(date +%s) - START )) s"
cd /tmp && tar czf "$OUT/hostpin_results.tar.gz" sr_results && ls -la "$OUT"
