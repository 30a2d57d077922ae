#!/usr/bin/env bash
# One-call check of the GPU environment for the DeepSpeed samples (no tracer):
# install from .whl/, then short stage 1 runs of train.py with and without PyTorch's CUDA
# sanitizer on DeepSpeed 0.14.2 / 0.14.3, the run-time patch, and a stage 3 smoke run.
# Stays inside BUDGET_S seconds (default 270): runs that no longer fit are skipped.
# Logs go to $LOGDIR and, tarred after every step, to $OUT/validate.tgz (+ summary.txt).
#
#   bash samples/deepspeed/validate_env.sh        # on nvidia-h200-x2, carry .whl
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
OUT="${OUT:-/tmp/sr-validate-out}"
LOGDIR="${LOGDIR:-/tmp/sr-validate}"
BUDGET_S="${BUDGET_S:-270}"
STEPS="${STEPS:-4}"
mkdir -p "$OUT" "$LOGDIR"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
T0=$SECONDS

pack() { tar czf "$OUT/validate.tgz" -C "$LOGDIR" . 2>/dev/null; cp "$LOGDIR/summary.txt" "$OUT/" 2>/dev/null; }
note() { echo "$*" | tee -a "$LOGDIR/summary.txt"; }

# run NAME CAP_S VAR=VAL... -- CMD...
run() {
    local name=$1 cap=$2; shift 2
    local envs=()
    while [[ $# -gt 0 && "$1" != "--" ]]; do envs+=("$1"); shift; done
    shift
    local left=$(( BUDGET_S - (SECONDS - T0) - 8 ))
    local t=$(( left < cap ? left : cap ))
    if (( t < 25 )); then note "$name SKIPPED (budget)"; return; fi
    local start=$SECONDS
    timeout -k 5 "$t" env "${envs[@]}" "$@" > "$LOGDIR/$name.log" 2>&1
    local rc=$?
    local races; races=$(grep -c "CSAN detected a possible data race" "$LOGDIR/$name.log")
    note "$name rc=$rc wall_s=$((SECONDS - start)) limit_s=$t csan_reports=$races $(grep -h '^SR_RESULT' "$LOGDIR/$name.log" | tr '\n' ' ')"
    pack
}

{
    date -u +%FT%TZ; uname -r; nvidia-smi -L; nvidia-smi --query-gpu=driver_version --format=csv,noheader
    nvidia-smi topo -m
    command -v python3 accelerate
    python3 -c 'import sys, torch, numpy; print(sys.version); print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version(), "gpus", torch.cuda.device_count()); print("numpy", numpy.__version__)'
    python3 -m pip list 2>/dev/null | grep -iE '^(accelerate|transformers|typing.extensions|setuptools|wheel|numpy|psutil|py-cpuinfo|packaging|tqdm|ninja|nvidia-ml-py|pynvml|pydantic|hjson) '
} > "$LOGDIR/env.txt" 2>&1
note "env done at $((SECONDS - T0))s"

start=$SECONDS
bash "$HERE/setup_env.sh" > "$LOGDIR/setup.log" 2>&1
note "setup rc=$? wall_s=$((SECONDS - start))"
pack

D="$HERE/debug.sh"
run z1_0142_plain      75 DS_VERSION=0.14.2 -- bash "$D" --steps $((STEPS + 2))
run z1_0142_csan       75 DS_VERSION=0.14.2 TORCH_CUDA_SANITIZER=1 -- bash "$D" --steps "$STEPS"
run z1_0143_csan       75 DS_VERSION=0.14.3 TORCH_CUDA_SANITIZER=1 -- bash "$D" --steps "$STEPS"
run z1_0142_patch_csan 75 DS_VERSION=0.14.2 TORCH_CUDA_SANITIZER=1 -- bash "$D" --steps "$STEPS" --patch_deepspeed
run z3_0142_bf16       60 DS_VERSION=0.14.2 -- bash "$D" --stage 3 --steps "$STEPS"
run z1_0143_plain      60 DS_VERSION=0.14.3 -- bash "$D" --steps $((STEPS + 2))
note "total wall_s=$((SECONDS - T0))"
pack
