#!/usr/bin/env bash
# Cache lines the tracer's launch path touches that are no longer cached, per launch, on the CPU
# machine: bench/handler_cost.cpp's shared-library build (as libstreamrace.so is loaded) under
# `valgrind --tool=callgrind --cache-sim=yes`, with COLD_KIB KiB of other memory written between
# launches (as PyTorch's dispatch does between two launches on the GPU machine) and a simulated
# last-level cache of LL_KIB KiB. Deterministic: the difference of two runs (2N and N launches in
# blocks of 2000, half of them traced), per traced launch, counted only inside
# CudaCallHandler::on_call. Instructions (Ir), last-level read misses (DLmr) and write misses
# (DLmw): on a machine whose caches PyTorch's own work keeps full, each miss is a wait.
#
#   bench/handler_cache_lines.sh [BIN] [POINTERS] [SCALARS] [N]
#
# KEEP=DIR keeps the two callgrind files there (callgrind_annotate --auto=yes shows the lines).
set -euo pipefail
BIN=${1:-build/bin/streamrace-handler-cost-shared}
POINTERS=${2:-3}
SCALARS=${3:-3}
N=${4:-8000}
COLD_KIB=${COLD_KIB:-4096}
LL_KIB=${LL_KIB:-2048}
command -v valgrind >/dev/null || { echo "handler_cache_lines: valgrind is not installed (apt-get install valgrind)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for n in "$N" "$((2 * N))"; do
  valgrind --tool=callgrind --cache-sim=yes --LL=$((LL_KIB * 1024)),16,64 --callgrind-out-file="$tmp/cg.$n" \
    --toggle-collect='*CudaCallHandler::on_call*' "$BIN" "$n" "$POINTERS" 2000 200 "$SCALARS" driver "$COLD_KIB" \
    >/dev/null 2>"$tmp/log.$n" &
done
wait
if [[ -n "${KEEP:-}" ]]; then mkdir -p "$KEEP" && cp "$tmp"/cg.* "$KEEP"/; fi
totals() { callgrind_annotate --show=Ir,DLmr,DLmw "$1" | awk '/PROGRAM TOTALS/ {gsub(",",""); print $1, $3, $5}'; }
read -r i1 r1 w1 < <(totals "$tmp/cg.$N")
read -r i2 r2 w2 < <(totals "$tmp/cg.$((2 * N))")
# Half of each run's launches are traced: N/2 more traced launches in the second run.
awk -v i1="$i1" -v i2="$i2" -v r1="$r1" -v r2="$r2" -v w1="$w1" -v w2="$w2" -v n="$((N / 2))" \
  -v p="$POINTERS" -v s="$SCALARS" -v c="$COLD_KIB" -v l="$LL_KIB" 'BEGIN {
  printf "pointers=%s scalars=%s cold_kib=%s ll_kib=%s: per traced launch Ir %.0f, LL read misses %.1f, LL write misses %.1f\n",
    p, s, c, l, (i2 - i1) / n, (r2 - r1) / n, (w2 - w1) / n }'
