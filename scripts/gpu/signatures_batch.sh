#!/usr/bin/env bash
# One batch on one H200 (issue #11 part 2): traces for learned access signatures. Records, for
# each job, precise-mode runs to learn from and a default-tier run to apply them to; the
# analysis is done on the CPU machine from the traces brought back (and they become fixtures):
#   PyTorch samples (samples/precise/torch_views.py): each case twice under --precise=all (a
#     signature is trusted once two measured launches agree) and once in the default tier;
#   GPT-2 ZeRO-2 and FSDP2 (samples/realistic/): --precise=all for 2 and 4 steps (what the first
#     N steps teach), the default tier for 10 steps.
# Carry `gpu-carry` and `.whl`. Writes $OUT/summary.txt and $OUT/signatures.tar.gz.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
R=/tmp/sr_sig
rm -rf "$R" && mkdir -p "$R"/runs "$OUT"
SR="$(pwd)/gpu-carry/bin/streamrace"
START=$(date +%s)
DEADLINE_S=${DEADLINE_S:-420}
S="$OUT/summary.txt"
source scripts/gpu/batch_lib.sh
{ echo "== $(date -u +%FT%TZ)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; cat gpu-carry/COMMIT; } > "$S" 2>&1
ONE_GREP="SUMMARY|launches measured|median_step_ms|rror|signal" ONE_CUT=400
for c in views_racy views_clean raw_racy raw_clean readread disjoint; do
  for i in 1 2; do one "torch_${c}_p$i" 60 "$SR" run --precise=all --no-color -o "$R/runs/torch_${c}_p$i/t" -- python3 samples/precise/torch_views.py $c; done
  one "torch_${c}_d" 60 "$SR" run --no-color -o "$R/runs/torch_${c}_d/t" -- python3 samples/precise/torch_views.py $c
done
eval "$(bash samples/realistic/setup_env.sh --print-env)" > "$R/setup.log" 2>&1
Z="python3 samples/realistic/gpt2_zero2.py"
F="python3 samples/realistic/gpt2_fsdp2.py"
one z2_p2 120 "$SR" run --precise=all --no-color -o "$R/runs/z2_p2/t" -- $Z --steps 1 --warmup 1
one z2_d 120 "$SR" run --no-color -o "$R/runs/z2_d/t" -- $Z --steps 8 --warmup 2
one fsdp2_d 120 "$SR" run --no-color -o "$R/runs/fsdp2_d/t" -- $F --steps 8 --warmup 2
one fsdp2_p2 150 "$SR" run --precise=all --no-color -o "$R/runs/fsdp2_p2/t" -- $F --steps 1 --warmup 1
one z2_p4 150 "$SR" run --precise=all --no-color -o "$R/runs/z2_p4/t" -- $Z --steps 3 --warmup 1
echo "done after $(( $(date +%s) - START )) s" >> "$S"
cd /tmp && tar czf "$OUT/signatures.tar.gz" sr_sig
ls -la "$OUT"
