#!/usr/bin/env bash
# The DeepSpeed case-study batch (issue 6), for one call on the nvidia-h200-x2 machine.
#
#   run(kind="nvidia-h200-x2", timeout_s=570, carry=[".whl", <tracer build dirs>],
#       command="bash scripts/gpu/deepspeed_batch.sh")
#
# 1. installs DeepSpeed 0.14.2 / 0.14.3 offline from .whl/ (samples/deepspeed/setup_env.sh);
# 2. runs samples/deepspeed/debug.sh (accelerate launch --use_deepspeed, 2 ranks) as:
#      traced  = `streamrace run -o $WORK/traces/trace-<name> -- bash debug.sh ...`
#      csan    = TORCH_CUDA_SANITIZER=1, no tracer (CUPTI and CSAN could run together, but
#                kept apart so each run's timing is clean)
#      plain   = neither, for the "tracer's added time" number
#    cases: ZeRO-1 fp16 on 0.14.2, 0.14.2 + --patch_deepspeed, 0.14.3 (traced, csan, plain);
#    ZeRO-3 fp16 with the same 1 MiB-element bucket on 0.14.2 and 0.14.3 (traced, plain);
#    seed 002's ZeRO-3 config (bf16, DeepSpeed's default bucket) traced with device
#    timestamps (STREAMRACE_TIMING=1), and plain;
# 3. packs logs into $OUT/logs.tgz (refreshed after every run) and the traces into at most
#    6 more files of <= 15 MiB each under $OUT (the device tool brings back <= 8 files,
#    <= 16 MiB each, <= 64 MiB together), most important first; what did not fit is listed
#    in logs/packing.txt.
#
# Every run has its own `timeout`, and runs that no longer fit in BUDGET_S are skipped (and
# listed as skipped), so one hung run cannot eat the lease.
#
# Environment:
#   STREAMRACE_BIN   streamrace CLI (default: build/bin/streamrace, else gpu-carry/bin/streamrace);
#                    the CLI finds libstreamrace.so in ../lib beside itself or via STREAMRACE_LIB.
#                    Without a working binary the traced runs are skipped, the rest still run.
#   BUDGET_S         seconds for installs + runs (default 480); packing takes ~20 s more
#   STEPS            training steps per run (default 20)
#   EXTRA_ARGS       extra train.py arguments for every run (e.g. "--initial_scale_power 16")
#   SEED002_DS       DeepSpeed version for the seed-002 run (default 0.14.2)
#   WORK             scratch dir (default /tmp/ds-batch); OUT as set by the device tool
#   ONLY             space-separated case names to run (default: all), e.g. "z1_0142 z1_0143"
#   SKIP_MODES       space-separated modes not to run, e.g. "csan plain"
#   MAX_TRACE_FILES  trace archives to bring back (default 6)
#   CAP_S            at most this many seconds for any one run
set -uo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$REPO" || exit 2
OUT="${OUT:-/tmp/ds-batch-out}"
WORK="${WORK:-/tmp/ds-batch}"
BUDGET_S="${BUDGET_S:-480}"
STEPS="${STEPS:-20}"
EXTRA_ARGS="${EXTRA_ARGS:-}"
SEED002_DS="${SEED002_DS:-0.14.2}"
ONLY="${ONLY:-}"
DEBUG_SH="${DEBUG_SH:-$REPO/samples/deepspeed/debug.sh}"
T0=$SECONDS

# NVLink multicast stays off on these shared hosts (device KINDS.md); debug.sh sets it too.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1

rm -rf "$WORK"
mkdir -p "$WORK/logs" "$WORK/traces" "$OUT"
LOGS="$WORK/logs"
SUMMARY="$LOGS/summary.tsv"
printf 'name\tmode\tds\trc\twall_s\tlimit_s\tcsan_reports\ttrace_files\ttrace_bytes\tstep_ms_rank0\tstep_ms_rank1\n' > "$SUMMARY"
exec > >(tee -a "$LOGS/batch.log") 2>&1
set -x

pack_logs() { tar czf "$OUT/logs.tgz" -C "$WORK" logs 2>/dev/null; }
left_s() { echo $(( BUDGET_S - (SECONDS - T0) )); }
wanted() { [[ -z "$ONLY" ]] || [[ " $ONLY " == *" $1 "* ]]; }

# ---------------------------------------------------------------------------- machine
{
    date -u +%FT%TZ
    uname -r
    nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv
    nvidia-smi topo -m
    python3 -c 'import sys, torch, numpy; print(sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version(), "gpus", torch.cuda.device_count(), "numpy", numpy.__version__)'
    python3 -m pip list 2>/dev/null | grep -iE '^(accelerate|transformers|typing.extensions|numpy) '
    git -C "$REPO" log -1 --format='repo commit %H %s' 2>/dev/null || true
} > "$LOGS/machine.txt" 2>&1

# ---------------------------------------------------------------------------- streamrace
SR="${STREAMRACE_BIN:-}"
if [[ -z "$SR" ]]; then
    for c in build/bin/streamrace gpu-carry/bin/streamrace; do
        [[ -x "$REPO/$c" ]] && { SR="$REPO/$c"; break; }
    done
fi
HAVE_SR=0
if [[ -n "$SR" && -x "$SR" ]]; then
    ldd "$SR" | grep "not found" && echo "streamrace binary misses libraries"
    if timeout 20 "$SR" --version > "$LOGS/streamrace-version.txt" 2>&1; then HAVE_SR=1; fi
    srdir="$(dirname "$SR")"
    for l in "${STREAMRACE_LIB:-}" "$srdir/../lib/libstreamrace.so" "$srdir/libstreamrace.so"; do
        [[ -n "$l" && -f "$l" ]] && { ldd "$l" > "$LOGS/libstreamrace-ldd.txt" 2>&1; break; }
    done
fi
echo "streamrace: ${SR:-<none>} usable=$HAVE_SR" | tee -a "$LOGS/machine.txt"

# ---------------------------------------------------------------------------- install
t=$SECONDS
timeout -k 5 150 bash samples/deepspeed/setup_env.sh > "$LOGS/setup.log" 2>&1
SETUP_RC=$?
echo "setup rc=$SETUP_RC wall_s=$((SECONDS - t))" | tee -a "$LOGS/machine.txt"
pack_logs

# ---------------------------------------------------------------------------- runs
# case NAME MODE DS_VERSION CAP_S [VAR=VALUE ...] -- [train.py args ...]
#   MODE traced | csan | plain
case_run() {
    local name=$1 mode=$2 ver=$3 cap=$4; shift 4
    local envs=()
    while [[ $# -gt 0 && "$1" != "--" ]]; do envs+=("$1"); shift; done
    [[ $# -gt 0 ]] && shift
    local id="${name}_${mode}"
    wanted "$name" || return 0
    [[ " ${SKIP_MODES:-} " == *" $mode "* ]] && return 0
    local left; left=$(left_s)
    (( ${CAP_S:-0} > 0 && cap > CAP_S )) && cap=$CAP_S
    local limit=$(( left < cap ? left : cap ))
    local why=""
    (( SETUP_RC == 0 )) || why="setup failed"
    [[ "$mode" != traced || $HAVE_SR == 1 ]] || why="no usable streamrace binary"
    (( limit >= 30 )) || why="budget ($left s left)"
    if [[ -n "$why" ]]; then
        printf '%s\t%s\t%s\tSKIPPED: %s\n' "$name" "$mode" "$ver" "$why" >> "$SUMMARY"
        return 0
    fi
    # shellcheck disable=SC2206
    local extra=($EXTRA_ARGS)
    local cmd=(bash "$DEBUG_SH" --steps "$STEPS" "${extra[@]}" "$@")
    local tdir="$WORK/traces/trace-$name"
    envs+=(DS_VERSION="$ver")
    case "$mode" in
        traced) rm -rf "$tdir"; mkdir -p "$tdir"
                cmd=("$SR" run --no-color -o "$tdir" -- "${cmd[@]}") ;;
        csan)   envs+=(TORCH_CUDA_SANITIZER=1) ;;
        plain)  ;;
    esac
    local t_start t_end rc
    t_start=$(date +%s.%N)
    timeout -k 10 "$limit" env "${envs[@]}" "${cmd[@]}" > "$LOGS/$id.log" 2>&1
    rc=$?
    t_end=$(date +%s.%N)
    local wall csan nfiles nbytes s0
    wall=$(python3 -c "print(f'{$t_end - $t_start:.2f}')")
    csan=$(grep -c "CSAN detected a possible data race" "$LOGS/$id.log")
    nfiles=0; nbytes=0
    if [[ "$mode" == traced ]]; then
        nfiles=$(find "$tdir" -type f | wc -l)
        nbytes=$(du -sb "$tdir" | cut -f1)
    fi
    s0=$({ grep -h '^SR_RESULT ' "$LOGS/$id.log" || true; } | python3 -c '
import sys, json
ms = {}
for line in sys.stdin:
    r = json.loads(line.split(" ", 1)[1])
    ms[r["rank"]] = "%.3f" % r["step_ms"]
print(ms.get(0, "nan") + "\t" + ms.get(1, "nan"))' 2>/dev/null || printf 'nan\tnan')
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$mode" "$ver" "$rc" "$wall" "$limit" "$csan" "$nfiles" "$nbytes" "$s0" >> "$SUMMARY"
    pack_logs
}

Z1=(DS_CONFIG=ds_zero1_fp16.json)
Z3=(DS_CONFIG=ds_zero3_fp16.json)
S2=(DS_CONFIG=ds_zero3_bf16.json STREAMRACE_TIMING=1)

# In priority order: the traced seed reproduction and its untraced twin first.
case_run z1_0142       traced 0.14.2 120 "${Z1[@]}" --
case_run z1_0142       plain  0.14.2  90 "${Z1[@]}" --
case_run z1_0142_patch traced 0.14.2 120 "${Z1[@]}" -- --patch_deepspeed
case_run z1_0143       traced 0.14.3 120 "${Z1[@]}" --
case_run z1_0142       csan   0.14.2  90 "${Z1[@]}" --
case_run z1_0142_patch csan   0.14.2  90 "${Z1[@]}" -- --patch_deepspeed
case_run z1_0143       csan   0.14.3  90 "${Z1[@]}" --
case_run z3_0142       traced 0.14.2 120 "${Z3[@]}" -- --stage 3
case_run z3_0143       traced 0.14.3 120 "${Z3[@]}" -- --stage 3
case_run seed002       traced "$SEED002_DS" 120 "${S2[@]}" -- --stage 3
case_run seed002       plain  "$SEED002_DS"  90 DS_CONFIG=ds_zero3_bf16.json -- --stage 3
case_run z1_0142_patch plain  0.14.2  90 "${Z1[@]}" -- --patch_deepspeed
case_run z1_0143       plain  0.14.3  90 "${Z1[@]}" --
case_run z3_0142       plain  0.14.2  90 "${Z3[@]}" -- --stage 3
case_run z3_0143       plain  0.14.3  90 "${Z3[@]}" -- --stage 3

set +x
echo "runs done at $((SECONDS - T0)) s"
column -t -s $'\t' "$SUMMARY" 2>/dev/null || cat "$SUMMARY"

# ---------------------------------------------------------------------------- pack traces
# One archive per group, most important first; each split into <= 15 MiB parts. At most 6
# trace files and 56 MiB, leaving room for logs.tgz within the tool's 8 files / 64 MiB.
PACK="$LOGS/packing.txt"
: > "$PACK"
max_files=${MAX_TRACE_FILES:-6}
max_bytes=$((56 * 1024 * 1024))
part_bytes=$((15 * 1024 * 1024))
used_files=0; used_bytes=0
if command -v zstd >/dev/null 2>&1; then comp=(zstd -q -T0 -6); ext=tar.zst; else comp=(gzip -6); ext=tar.gz; fi
groups=("z1:trace-z1_0142 trace-z1_0142_patch trace-z1_0143"
        "seed002:trace-seed002"
        "z3:trace-z3_0142 trace-z3_0143")
for g in "${groups[@]}"; do
    gname=${g%%:*}; dirs=()
    for d in ${g#*:}; do [[ -d "$WORK/traces/$d" ]] && [[ -n "$(ls -A "$WORK/traces/$d")" ]] && dirs+=("$d"); done
    (( ${#dirs[@]} )) || { echo "$gname: no traces" >> "$PACK"; continue; }
    arc="$WORK/traces-$gname.$ext"
    tar cf - -C "$WORK/traces" "${dirs[@]}" | "${comp[@]}" > "$arc"
    size=$(stat -c %s "$arc")
    nparts=$(( (size + part_bytes - 1) / part_bytes ))
    if (( used_files + nparts > max_files || used_bytes + size > max_bytes )); then
        echo "$gname: $size bytes in $nparts parts does not fit (used $used_files files, $used_bytes bytes); not returned" >> "$PACK"
        continue
    fi
    if (( nparts == 1 )); then
        cp "$arc" "$OUT/"
    else
        split -b "$part_bytes" -d -a 1 "$arc" "$OUT/traces-$gname.$ext.part"
    fi
    used_files=$((used_files + nparts)); used_bytes=$((used_bytes + size))
    echo "$gname: ${dirs[*]} -> $size bytes, $nparts file(s)" >> "$PACK"
done
echo "reassemble split parts with: cat traces-NAME.$ext.part* > traces-NAME.$ext" >> "$PACK"
cat "$PACK"
echo "total $((SECONDS - T0)) s"
pack_logs
ls -la "$OUT"
