#!/usr/bin/env bash
# The call handler's cost per launch on a real job's launches (a corpus recorded on the GPU
# machine by bench/record_launch_corpus.sh; bench/data/*.corpus.zst), on the CPU machine:
# bench/launch_replay.cpp under `valgrind --tool=callgrind --cache-sim=yes`, counted only
# inside CudaCallHandler::on_call, the difference of a run of 2N launches and one of N (the
# set-up cancels), per launch. Deterministic. Instructions (Ir), first-level instruction
# cache misses (I1mr: lines of the handler's code fetched again), and last-level read (DLmr)
# and write (DLmw) misses, with COLD_KIB KiB (default 0) of other memory written and
# COLD_CODE_KIB KiB (default 0) of other code run between launches, and a simulated
# last-level cache of LL_KIB KiB (default 2048).
#
#   bench/launch_replay.sh [CORPUS] [N]      (default bench/data/zero2_h200.corpus.zst, 16000)
#
# KEEP=DIR keeps the callgrind files (callgrind_annotate --auto=yes shows the lines);
# BIN names the replay (default build/bin/streamrace-launch-replay); TOGGLE what callgrind counts
# (default *CudaCallHandler::on_call*; "main" counts the whole loop, for builds that inline it).
set -euo pipefail
CORPUS=${1:-bench/data/zero2_h200.corpus.zst}
N=${2:-16000}
BIN=${BIN:-build/bin/streamrace-launch-replay}
COLD_KIB=${COLD_KIB:-0}
COLD_CODE_KIB=${COLD_CODE_KIB:-0}
LL_KIB=${LL_KIB:-2048}
command -v valgrind >/dev/null || { echo "launch_replay: valgrind is not installed (apt-get install valgrind)" >&2; exit 2; }
[[ -x "$BIN" ]] || { echo "launch_replay: $BIN not built (cmake --build build --target streamrace-launch-replay)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for n in "$N" "$((2 * N))"; do
  # With COLD_KIB, half the launches are traced (blocks of 2000 with and without).
  valgrind --tool=callgrind --cache-sim=yes --LL=$((LL_KIB * 1024)),16,64 --callgrind-out-file="$tmp/cg.$n" \
    --toggle-collect="${TOGGLE:-*CudaCallHandler::on_call*}" "$BIN" "$CORPUS" "$n" "$COLD_KIB" "$COLD_CODE_KIB" >"$tmp/out.$n" 2>"$tmp/log.$n" ||
    { cat "$tmp/log.$n" >&2; exit 2; }
done
if [[ -n "${KEEP:-}" ]]; then mkdir -p "$KEEP" && cp "$tmp"/cg.* "$KEEP"/; fi
head -n1 "$tmp/out.$N"
totals() { callgrind_annotate --show=Ir,I1mr,DLmr,DLmw "$1" | awk '/PROGRAM TOTALS/ {gsub(",",""); print $1, $3, $5, $7}'; }
read -r i1 m1 r1 w1 < <(totals "$tmp/cg.$N")
read -r i2 m2 r2 w2 < <(totals "$tmp/cg.$((2 * N))")
traced=$N
[[ "$COLD_KIB" != 0 || "$COLD_CODE_KIB" != 0 ]] && traced=$((N / 2))
awk -v i1="$i1" -v i2="$i2" -v m1="$m1" -v m2="$m2" -v r1="$r1" -v r2="$r2" -v w1="$w1" -v w2="$w2" -v n="$traced" \
  -v c="$COLD_KIB" -v cc="$COLD_CODE_KIB" -v l="$LL_KIB" 'BEGIN {
  printf "cold_kib=%s cold_code_kib=%s ll_kib=%s: per launch Ir %.0f, I1 misses %.1f, LL read misses %.1f, LL write misses %.1f\n",
    c, cc, l, (i2 - i1) / n, (m2 - m1) / n, (r2 - r1) / n, (w2 - w1) / n }'
