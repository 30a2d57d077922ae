#!/usr/bin/env bash
# Launch samples/deepspeed/train.py on this host's GPUs the way the user does:
#   accelerate launch --use_deepspeed --deepspeed_config_file <json> train.py [train.py args]
#
# Environment (all optional):
#   DS_VERSION        DeepSpeed version installed by setup_env.sh       (default 0.14.2)
#   DS_SITE           directory holding that install (default ${DS_PREFIX:-/tmp/ds-}$DS_VERSION)
#   DS_CONFIG         DeepSpeed JSON config (default: ds_zero1_fp16.json, or
#                     ds_zero3_bf16.json when the arguments contain "--stage 3")
#   NUM_PROCESSES     ranks (default 2)
#   MAIN_PORT         rendezvous port (default: a free port picked here)
#   TORCH_CUDA_SANITIZER  passed through unchanged when the caller sets it
#   ACCELERATE        the accelerate command (default: "accelerate" from PATH, else
#                     "$PYTHON -m accelerate.commands.accelerate_cli")
#   PYTHON            interpreter used for helpers (default python3)
# Wrap it with the tracer:  streamrace run -o trace/ -- bash samples/deepspeed/debug.sh
set -euo pipefail
set -x

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
DS_VERSION="${DS_VERSION:-0.14.2}"
DS_SITE="${DS_SITE:-${DS_PREFIX:-/tmp/ds-}${DS_VERSION}}"
NUM_PROCESSES="${NUM_PROCESSES:-2}"
PYTHON="${PYTHON:-python3}"

if [[ ! -d "$DS_SITE/deepspeed" ]]; then
    echo "debug.sh: no DeepSpeed in $DS_SITE; run samples/deepspeed/setup_env.sh first" >&2
    exit 2
fi

if [[ -z "${DS_CONFIG:-}" ]]; then
    DS_CONFIG="$HERE/ds_zero1_fp16.json"
    prev=""
    for a in "$@"; do
        if [[ "$prev" == "--stage" && "$a" == "3" ]] || [[ "$a" == "--stage=3" ]]; then
            DS_CONFIG="$HERE/ds_zero3_bf16.json"
        fi
        prev="$a"
    done
fi
[[ "$DS_CONFIG" == /* ]] || { [[ -f "$DS_CONFIG" ]] || DS_CONFIG="$HERE/$DS_CONFIG"; }

# sitecustomize.py (import shims) first, then the chosen DeepSpeed and its pure-Python deps.
export PYTHONPATH="$HERE:$DS_SITE${PYTHONPATH:+:$PYTHONPATH}"
export DS_ACCELERATOR=cuda DS_BUILD_OPS=0
export PYTHONUNBUFFERED=1
# NVLink multicast stays off on the shared GPU hosts (device KINDS.md).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false

if [[ -z "${MAIN_PORT:-}" ]]; then
    MAIN_PORT="$("$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')"
fi

if [[ -n "${TORCH_CUDA_SANITIZER:-}" ]]; then
    echo "debug.sh: TORCH_CUDA_SANITIZER=$TORCH_CUDA_SANITIZER (PyTorch's CUDA sanitizer on)"
fi

if [[ -n "${ACCELERATE:-}" ]]; then
    read -r -a LAUNCH <<<"$ACCELERATE"
elif command -v accelerate >/dev/null 2>&1; then
    LAUNCH=(accelerate)
else
    LAUNCH=("$PYTHON" -m accelerate.commands.accelerate_cli)
fi

exec "${LAUNCH[@]}" launch \
    --num_machines 1 --machine_rank 0 \
    --num_processes "$NUM_PROCESSES" \
    --main_process_ip 127.0.0.1 --main_process_port "$MAIN_PORT" \
    --use_deepspeed --deepspeed_config_file "$DS_CONFIG" \
    --dynamo_backend no \
    "$HERE/train.py" "$@"
