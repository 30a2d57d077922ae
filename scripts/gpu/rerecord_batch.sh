#!/usr/bin/env bash
# Re-records every GPU fixture (tests/data/gpu/<case>/) with the carried tracer, in ONE call on
# one H200, with the very program invocation and tracer options its original batch used:
#
#   CUDA samples (samples/cuda/<b>.cu, racy|clean)   tracer_batch.sh (run 3), graph_batch.sh (5),
#                                                    graph_batch2.sh (8), graph_batch3.sh (10):
#       streamrace run --no-color -o DIR -- <bin>/<b> racy|clean
#   cupti_busy_racy                                  tracer_batch.sh:
#       streamrace run ... -- compute-sanitizer --tool memcheck <bin>/two_streams racy
#   cupti_busy_status_late                           the same with STREAMRACE_HOST_CLOCK=tsc (session 39):
#       a notice reaches the file before CUPTI refuses the tracer, so the header says "ok"
#   pinned_host_reuse_*, torch_pin_memory_reuse_*    hostpin_batch.sh (9): run --host-accesses
#   torch_two_streams_*                              tracer_batch.sh (3): python3 samples/torch/two_streams.py
#   torch_record_stream_{racy,record,wait}           allocator_batch.sh (4): python3 samples/torch/record_stream.py
#   torch_graph_capture_*, torch_graphed_callables_* graph_batch3.sh (10)
#   ring_steps_ring_*                                ring_batch.sh (11): run --ring 4 --step-range step
#   ring_steps_window_racy                           ring_batch.sh (11): run --steps 10:20 --step-range step
#   skipped on one GPU: nccl_allreduce_* (one process driving 2 GPUs: ncclCommInitAll on devices
#   0 and 1, the sample exits 3 with one) and torch_nccl_allreduce_* (2 ranks, torchrun
#   --nproc_per_node=2: 2 traces committed).
#
# The samples are compiled here with nvcc -arch=sm_90 (in parallel), while the PyTorch cases
# already run: two lanes, one for the PyTorch cases, one for the compile then the CUDA cases
# (a finding depends on the recorded calls' order, not on timing; SERIAL=1 runs the lanes one
# after the other). Each run under `timeout`, all of it inside a global deadline (DEADLINE_S,
# default 420 s) after which the remaining cases are skipped and named in logs/summary.txt.
#
#   bash scripts/gpu/rerecord_batch.sh        # on the GPU machine, repo root, carry ["gpu-carry"]
#   bash scripts/gpu/rerecord_batch.sh --list # here: each case and its invocation, or why skipped
#
# Env: OUT (default /tmp/rerecord_out), DEADLINE_S (420), ONLY (a regex on case names), SERIAL.
# Writes $OUT/rerecord.tar.gz (traces/<case>/*.srace, logs/: summary.txt, machine.txt,
# batch.log, <case>.log, nvcc logs) and $OUT/summary.txt. Then, on the CPU machine:
#   python3 scripts/gpu/compare_fixtures.py rerecord.tar.gz build/bin/streamrace
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$REPO" || exit 2
SELF="$REPO/scripts/gpu/$(basename "${BASH_SOURCE[0]}")"
OUT=${OUT:-/tmp/rerecord_out}
export DEADLINE_S=${DEADLINE_S:-420} ONLY=${ONLY:-}
export T0=${T0:-$(date +%s)}          # shared with the lanes (this script re-invoked)
W=/tmp/sr_rerecord                    # not under $OUT: packed at the end
R="$W/rerecord"                       # the tarball's root: traces/, logs/
BIN="$W/bin"
SR="$REPO/gpu-carry/bin/streamrace"
LIB="$REPO/gpu-carry/lib/libstreamrace.so"
RESERVE_S=15                          # kept for packing after the last run
CSAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)

left() { echo $(( DEADLINE_S - RESERVE_S - ($(date +%s) - T0) )); }
log() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a "$R/logs/batch.log"; }

# invocation CASE: sets INV_LANE (cuda|torch), INV_BIN (the sample binary it needs, or empty),
# INV_FLAGS (streamrace run options), INV_CMD (the program), INV_T (its timeout, s), INV_MIN
# (the least time left to start it), INV_ENV (VAR=value words for `streamrace run`), or INV_SKIP
# (why it is not re-recorded).
invocation() {
  local n=$1 m=${1##*_} b=${1%_*}
  INV_LANE=cuda INV_BIN="" INV_FLAGS=() INV_CMD=() INV_ENV=() INV_T=30 INV_MIN=10 INV_SKIP=""
  case $n in
    nccl_allreduce_racy | nccl_allreduce_clean)
      INV_SKIP="needs 2 GPUs: one process drives devices 0 and 1 (ncclCommInitAll, 2 ranks in one trace, one occurrence per GPU); the sample exits 3 on one GPU"
      return ;;
    torch_nccl_allreduce_racy | torch_nccl_allreduce_clean)
      INV_SKIP="recorded with 2 ranks (torchrun --nproc_per_node=2, 2 traces committed): cannot be re-recorded on 1 GPU"
      return ;;
    cupti_busy_racy | cupti_busy_status_late)
      INV_BIN=two_streams INV_T=90 INV_MIN=30
      INV_CMD=("$CSAN" --tool memcheck "$BIN/two_streams" racy)
      [ "$n" = cupti_busy_status_late ] && INV_ENV=(STREAMRACE_HOST_CLOCK=tsc)
      return ;;
  esac
  case $n in
    torch_record_stream_racy | torch_record_stream_record | torch_record_stream_wait) ;;
    *_racy | *_clean) ;;
    *) INV_SKIP="no invocation known for this case (mode '$m'): add it to invocation() in $SELF"; return ;;
  esac
  case $b in
    two_streams | event_rerecord | legacy_stream | host_sync | free_implicit_sync | pageable_copy | \
    mallocasync_reuse | kernel_args | four_threads | graph_side_stream | graph_two_branches | \
    graph_explicit | graph_nccl_allreduce)
      INV_BIN=$b INV_CMD=("$BIN/$b" "$m") ;;
    pinned_host_reuse)
      INV_BIN=$b INV_FLAGS=(--host-accesses) INV_CMD=("$BIN/$b" "$m") ;;
    torch_two_streams)       INV_LANE=torch INV_T=60 INV_MIN=25 INV_CMD=(python3 samples/torch/two_streams.py "$m") ;;
    torch_record_stream)     INV_LANE=torch INV_T=90 INV_MIN=25 INV_CMD=(python3 samples/torch/record_stream.py "$m") ;;
    torch_graph_capture)     INV_LANE=torch INV_T=60 INV_MIN=25 INV_CMD=(python3 samples/torch/graph_capture.py "$m") ;;
    torch_graphed_callables) INV_LANE=torch INV_T=90 INV_MIN=30 INV_CMD=(python3 samples/torch/graphed_callables.py "$m") ;;
    torch_pin_memory_reuse)
      INV_LANE=torch INV_T=90 INV_MIN=25 INV_FLAGS=(--host-accesses) INV_CMD=(python3 samples/torch/pin_memory_reuse.py "$m") ;;
    ring_steps_ring)
      INV_LANE=torch INV_T=60 INV_MIN=25 INV_FLAGS=(--ring 4 --step-range step) INV_CMD=(python3 samples/torch/ring_steps.py "$m") ;;
    ring_steps_window)
      INV_LANE=torch INV_T=60 INV_MIN=25 INV_FLAGS=(--steps 10:20 --step-range step) INV_CMD=(python3 samples/torch/ring_steps.py "$m") ;;
    *) INV_SKIP="no invocation known for this case: add it to invocation() in $SELF" ;;
  esac
}

cases() {
  local d
  for d in tests/data/gpu/*/; do
    d=${d%/}; d=${d##*/}
    [ -f "tests/data/gpu/$d/case.json" ] || continue
    [ -n "${ONLY:-}" ] && ! [[ $d =~ $ONLY ]] && continue
    echo "$d"
  done
}

# result CASE LINE: the case's summary line (assembled in case order at the end).
result() { echo "$1 $2" > "$R/logs/$1.result"; log "$1 $2"; }

run_case() {
  local n=$1
  invocation "$n"
  [ -n "$INV_SKIP" ] && { result "$n" "SKIPPED $INV_SKIP"; return; }
  if [ -n "$INV_BIN" ] && [ ! -x "$BIN/$INV_BIN" ]; then
    result "$n" "SKIPPED nvcc failed for $INV_BIN (logs/$INV_BIN.nvcc.log)"; return
  fi
  local l; l=$(left)
  if (( l < INV_MIN )); then result "$n" "SKIPPED deadline (${l}s left, needs ${INV_MIN}s)"; return; fi
  local t=$INV_T; (( l < t )) && t=$l
  local dir="$R/traces/$n" t1; t1=$(date +%s)
  rm -rf "$dir" && mkdir -p "$dir"
  echo "+ ${INV_ENV[*]} timeout -k 5 $t $SR run --no-color ${INV_FLAGS[*]} -o $dir -- ${INV_CMD[*]}" > "$R/logs/$n.log"
  env "${INV_ENV[@]}" timeout -k 5 "$t" "$SR" run --no-color "${INV_FLAGS[@]}" -o "$dir" -- "${INV_CMD[@]}" >> "$R/logs/$n.log" 2>&1 < /dev/null
  local rc=$? secs=$(( $(date +%s) - t1 ))
  # Only the traces stay under traces/<case>/; anything else run left there goes to logs/.
  local f
  for f in "$dir"/* "$dir"/.[!.]*; do
    [ -e "$f" ] || continue
    case $f in *.srace) ;; *) mkdir -p "$R/logs/$n.extra" && mv "$f" "$R/logs/$n.extra/" ;; esac
  done
  local k; k=$(find "$dir" -maxdepth 1 -name '*.srace' | wc -l)
  local note=""; (( rc == 124 || rc == 137 )) && note=" (timed out after ${t}s)"
  result "$n" "rc=$rc secs=$secs traces=$k$note"
}

compile_samples() {
  local bins=() n b seen=" "
  for n in $(cases); do
    invocation "$n"
    [ -z "$INV_SKIP" ] && [ -n "$INV_BIN" ] && [[ $seen != *" $INV_BIN "* ]] && { bins+=("$INV_BIN"); seen+="$INV_BIN "; }
  done
  (( ${#bins[@]} )) || return 0
  local nccl_inc="" nccl_libdir="" pynccl d
  for d in /usr/local/cuda/include /usr/include; do [ -f "$d/nccl.h" ] && nccl_inc=$d && break; done
  pynccl=$(timeout 30 python3 -c 'import nvidia.nccl; print(list(nvidia.nccl.__path__)[0])' 2>/dev/null)
  [ -z "$nccl_inc" ] && [ -n "$pynccl" ] && nccl_inc=$pynccl/include
  for d in /usr/local/cuda/lib64 /usr/lib/x86_64-linux-gnu "$pynccl/lib"; do
    ls "$d"/libnccl.so* > /dev/null 2>&1 && nccl_libdir=$d && break
  done
  local nccl_linkdir=$nccl_libdir
  if [ -n "$nccl_libdir" ] && [ ! -e "$nccl_libdir/libnccl.so" ]; then
    mkdir -p "$W/ncclink" && ln -sf "$nccl_libdir"/libnccl.so.2 "$W/ncclink/libnccl.so" && nccl_linkdir=$W/ncclink
  fi
  echo "nccl include=$nccl_inc lib=$nccl_libdir" > "$R/logs/nccl.txt"
  log "nvcc: ${bins[*]}"
  local pids=() extra
  for b in "${bins[@]}"; do
    extra=()
    # shellcheck disable=SC2054  # -rpath,DIR is one word
    case $b in *nccl*) extra=(-I"$nccl_inc" -L"$nccl_linkdir" -lnccl -Xlinker -rpath,"$nccl_libdir") ;; esac
    timeout -k 5 180 nvcc -O2 -arch=sm_90 -std=c++17 -cudart shared -o "$BIN/$b" "samples/cuda/$b.cu" "${extra[@]}" \
      -Xlinker -rpath,/usr/local/cuda/lib64 > "$R/logs/$b.nvcc.log" 2>&1 &
    pids+=($!)
  done
  wait "${pids[@]}"  # the compilers only (never a bare wait)
  for b in "${bins[@]}"; do [ -x "$BIN/$b" ] || log "nvcc failed for $b: $(tail -3 "$R/logs/$b.nvcc.log" | tr '\n' ' ')"; done
  log "nvcc done"
}

lane() {  # LANE: its cases, in order (the cuda lane compiles first)
  local want=$1 n
  [ "$want" = cuda ] && compile_samples
  for n in $(cases); do
    invocation "$n"
    [ -z "$INV_SKIP" ] && [ "$INV_LANE" = "$want" ] && run_case "$n"  # skips: written by the main script
  done
}

# --- entry points --------------------------------------------------------------------------
if [ "${1:-}" = --list ]; then
  for n in $(cases); do
    invocation "$n"
    if [ -n "$INV_SKIP" ]; then printf '%-30s SKIPPED %s\n' "$n" "$INV_SKIP"
    else printf '%-30s [%s, %ss] streamrace run %s -- %s\n' "$n" "$INV_LANE" "$INV_T" "${INV_FLAGS[*]}" "${INV_CMD[*]/#$BIN\//bin/}"; fi
  done
  exit 0
fi
if [ "${1:-}" = --lane ]; then lane "$2"; exit 0; fi

rm -rf "$W" && mkdir -p "$BIN" "$R/traces" "$R/logs" "$OUT" || exit 2
: > "$R/logs/batch.log"
# The machine and versions, beside the runs (python's torch import alone takes seconds).
{
  date -u +"%Y-%m-%dT%H:%M:%SZ"
  timeout 20 nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader
  timeout 20 nvcc --version | tail -2
  timeout 60 python3 -c 'import torch, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version(), "gpus", torch.cuda.device_count())'
  timeout 20 "$CSAN" --version 2>&1 | tail -1
  uname -r; head -1 /etc/os-release
  echo "carry: $(cat gpu-carry/COMMIT 2>/dev/null | tr '\n' ' ')"
  timeout 10 "$SR" --version
} > "$R/logs/machine.txt" 2>&1 &
machine_pid=$!

pack() {
  local n
  wait "$machine_pid" 2> /dev/null
  {
    echo "# rerecord_batch.sh: one line per case (rc = streamrace run's exit status), deadline ${DEADLINE_S}s"
    for n in $(cases); do
      if [ -f "$R/logs/$n.result" ]; then cat "$R/logs/$n.result"
      else echo "$n SKIPPED not reached (global deadline: lane stopped)"; fi
    done
    echo "# done in $(( $(date +%s) - T0 ))s"
  } > "$R/logs/summary.txt"
  local late; late=$(grep -E '^[^#][^ ]* SKIPPED (deadline|not reached)' "$R/logs/summary.txt" | cut -d' ' -f1 | tr '\n' ' ')
  [ -n "$late" ] && echo "# skipped by the global deadline: $late" >> "$R/logs/summary.txt"
  cp "$R/logs/summary.txt" "$OUT/summary.txt"
  tar czf "$OUT/rerecord.tar.gz" -C "$R" traces logs
  ls -la "$OUT"
}

if [ ! -x "$SR" ] || [ ! -f "$LIB" ]; then
  log "no $SR or $LIB: build gpu-carry with scripts/gpu/build_carry.sh and carry it"
  for n in $(cases); do result "$n" "SKIPPED no gpu-carry"; done
  pack; exit 2
fi

# The cases not re-recorded on one GPU, whatever the deadline.
for n in $(cases); do
  invocation "$n"
  [ -n "$INV_SKIP" ] && result "$n" "SKIPPED $INV_SKIP"
done
trap 'log "interrupted: packing what there is"; pack; exit 3' INT TERM

# Each lane under a timeout of its own too: nothing outlives the deadline.
lane_limit=$(( DEADLINE_S - RESERVE_S + 5 - ($(date +%s) - T0) ))
(( lane_limit < 1 )) && lane_limit=1
if [ "${SERIAL:-0}" = 1 ]; then
  timeout -k 5 "$lane_limit" bash "$SELF" --lane cuda
  lane_limit=$(( DEADLINE_S - RESERVE_S + 5 - ($(date +%s) - T0) )); (( lane_limit < 1 )) && lane_limit=1
  timeout -k 5 "$lane_limit" bash "$SELF" --lane torch
else
  timeout -k 5 "$lane_limit" bash "$SELF" --lane cuda & p1=$!
  timeout -k 5 "$lane_limit" bash "$SELF" --lane torch & p2=$!
  wait "$p1" "$p2"
fi
trap - INT TERM
pack
echo "--- summary"
cat "$R/logs/summary.txt"
cat "$R/logs/machine.txt"
