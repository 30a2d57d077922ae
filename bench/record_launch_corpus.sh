#!/usr/bin/env bash
# On the GPU machine: records the kernel launches of the realistic jobs as the tracer's scan
# sees them (setting launch_corpus, tracer/launch_corpus.h), for bench/launch_replay.sh on the
# CPU machine: the launch-bound loop (samples/realistic/launch_loop.py) and GPT-2 124M under
# DeepSpeed ZeRO-2 (samples/realistic/gpt2_zero2.py, DeepSpeed from .whl/realistic).
#
#   OUT=DIR bash bench/record_launch_corpus.sh
#
# Writes DIR/launch_loop.corpus and DIR/zero2.corpus (text; zstd them to commit) and a log.
# Env: STREAMRACE (default gpu-carry/bin/streamrace), PYTHON (python3), LOOP_SKIP/LOOP_COUNT
# (launches of the loop skipped, then written: 20000, 4000), ZERO2_SKIP/ZERO2_COUNT (20000,
# 8000: past the warm-up, about six steps), STEPS (30).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-/tmp/launch_corpus}
STREAMRACE=${STREAMRACE:-gpu-carry/bin/streamrace}
PYTHON=${PYTHON:-python3}
mkdir -p "$OUT"
log="$OUT/record_launch_corpus.log"
: > "$log"
traces=$(mktemp -d)
{
  echo "date: $(date -u +%FT%TZ)"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null
  "$PYTHON" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1
  echo "streamrace: $($STREAMRACE --version 2>&1) ($(cat gpu-carry/COMMIT 2>/dev/null | tr '\n' ' '))"
} >> "$log"
STREAMRACE_LAUNCH_CORPUS="$OUT/launch_loop.corpus:${LOOP_SKIP:-20000}:${LOOP_COUNT:-4000}" \
  timeout -k 10 120 "$STREAMRACE" run --no-color -o "$traces/loop" -- \
  "$PYTHON" samples/realistic/launch_loop.py --ops 20000 --repeats 2 >> "$log" 2>&1
echo "launch loop: rc $?" >> "$log"
if envline=$(PYTHON="$PYTHON" bash samples/realistic/setup_env.sh --print-env 2>> "$log" | tail -n1) &&
   [[ "$envline" == "export PYTHONPATH="* ]]; then
  eval "$envline"
  export PYTHONPATH
  STREAMRACE_LAUNCH_CORPUS="$OUT/zero2.corpus:${ZERO2_SKIP:-20000}:${ZERO2_COUNT:-8000}" \
    timeout -k 10 300 "$STREAMRACE" run --no-color -o "$traces/zero2" -- \
    "$PYTHON" samples/realistic/gpt2_zero2.py --steps "${STEPS:-30}" --warmup 5 >> "$log" 2>&1
  echo "zero2: rc $?" >> "$log"
else
  echo "zero2: DeepSpeed could not be set up (samples/realistic/setup_env.sh)" >> "$log"
fi
for f in "$OUT"/*.corpus; do
  [[ -f "$f" ]] && echo "$(basename "$f"): $(grep -c '^launch ' "$f") launches, $(grep -c '^func ' "$f") functions, $(wc -c < "$f") bytes" >> "$log"
done
rm -rf "$traces"
cat "$log"
