#!/usr/bin/env bash
# One short batch on one H200 (issue #11): the GEMM samples under `run --confirm` with the cuBLAS
# interposer: the GEMM's side is exact from its call's arguments, precise mode measures the
# other kernel, so the racy twins should be certain and the clean ones silent.
# Carry `gpu-carry`. Writes $OUT/summary.txt and $OUT/cublas_confirm.tar.gz.
set -u
OUT=${OUT:-/tmp/out}
R=/tmp/sr_cublas_confirm
rm -rf "$R" && mkdir -p "$R"/runs "$OUT"
SR="$(pwd)/gpu-carry/bin/streamrace"
START=$(date +%s)
DEADLINE_S=${DEADLINE_S:-150}
S="$OUT/summary.txt"
source scripts/gpu/batch_lib.sh
{ echo "== $(date -u +%FT%TZ)"; cat gpu-carry/COMMIT; } > "$S" 2>&1
ONE_GREP="SUMMARY|confirmed|gone|still possible|rror|signal" ONE_CUT=700
for c in gemm_in_racy gemm_out_racy gemm_in_clean gemm_out_clean; do
  one "confirm_$c" 60 "$SR" run --confirm --no-color -o "$R/runs/confirm_$c/t" -- python3 samples/precise/torch_views.py $c
  "$SR" analyze --format json "$R/runs/confirm_$c/t/confirm" > "$R/runs/confirm_$c/confirm_report.json" 2>/dev/null
done
echo "done after $(( $(date +%s) - START )) s" >> "$S"
cd /tmp && tar czf "$OUT/cublas_confirm.tar.gz" sr_cublas_confirm
