#!/usr/bin/env bash
# Precise mode's exit-path crash (session 26: SIGSEGV / "corrupted double-linked list" at exit
# in graph_nccl_allreduce under --precise=all and in ZeRO-2's confirmation window): runs the
# cases with STREAMRACE_CRASH_BACKTRACE=1 so a dying process writes its native stack, and
# keeps each run's log. Carry ["gpu-carry"] (and ".whl" for ZEROS > 0). Writes $OUT/summary.txt
# and $OUT/logs.tar.gz.
#   RUNS=6 ZEROS=0 DEADLINE_S=240
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 PYTHONUNBUFFERED=1 STREAMRACE_CRASH_BACKTRACE=1
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$REPO" || exit 2
OUT=${OUT:-/tmp/crash_probe}
R=/tmp/sr_crash
rm -rf "$R" && mkdir -p "$R/runs" "$R/bin" "$OUT"
SR="$REPO/gpu-carry/bin/streamrace"
START=$(date +%s)
DEADLINE_S=${DEADLINE_S:-240}
S="$OUT/summary.txt"
source scripts/gpu/batch_lib.sh
echo "== $(date -u +%FT%TZ) carry $(head -1 gpu-carry/COMMIT)" > "$S"
timeout 150 nvcc -O2 -arch=sm_90 -std=c++17 -cudart shared -o "$R/bin/graph_nccl_allreduce" samples/cuda/graph_nccl_allreduce.cu \
  $(nccl_nvcc_flags) -Xlinker -rpath,/usr/local/cuda/lib64 > "$R/runs/nvcc.log" 2>&1 || echo "nvcc failed" >> "$S"
ONE_GREP="killed by signal|dies of signal|SUMMARY|malloc|free\(\)|corrupt" ONE_CUT=300
# MALLOC_DEBUG=1: glibc's checking allocator (libc_malloc_debug, malloc.check=3) aborts at the
# first bad free instead of at exit.
if [ "${MALLOC_DEBUG:-0}" = 1 ]; then
  md=$(ls /lib/x86_64-linux-gnu/libc_malloc_debug.so.0 /usr/lib/x86_64-linux-gnu/libc_malloc_debug.so.0 2>/dev/null | head -1)
  echo "malloc debug: ${md:-none}" >> "$S"
  [ -n "$md" ] && export LD_PRELOAD="$md" GLIBC_TUNABLES=glibc.malloc.check=3 MALLOC_PERTURB_=165
fi
for i in $(seq 1 "${RUNS:-6}"); do
  for m in racy clean; do
    one "nccl_${m}_$i" 40 "$SR" run --precise=all --no-color -o "$R/runs/nccl_${m}_$i/traces" -- "$R/bin/graph_nccl_allreduce" $m
  done
done
echo "== done $(( $(date +%s) - START )) s" >> "$S"
# Every distinct crash stack, once.
for f in "$R"/runs/*/log.txt; do
  awk '/dies of signal/{p=1} p&&/^\/|^\[|streamrace/{print} /^[^\/\[]/&&p&&!/dies of signal/{p=0}' "$f" | head -40 > "$f.stack"
done
for f in "$R"/runs/*/log.txt.stack; do [ -s "$f" ] && { echo "--- $f"; cat "$f"; } ; done | head -150 >> "$S"
tar -C "$R" --exclude='*.srace' -czf "$OUT/logs.tar.gz" runs
