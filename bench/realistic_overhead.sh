#!/usr/bin/env bash
# Tracer overhead on realistic jobs, for the GPU machine (one H200 is enough).
#
# Jobs (samples/realistic/):
#   zero2   GPT-2 124M under DeepSpeed ZeRO-2 (overlap_comm, contiguous gradients, bf16), one rank:
#           median step ms
#   launch  a launch-bound loop of tiny x.add_(1) ops: median us per op
#   fsdp2   (not run unless JOBS names it) GPT-2 124M under FSDP2: median step ms
#   native  (not run unless JOBS names it) samples/cuda/launch_bench.cu, a C++ loop of empty
#           kernel launches (built here with nvcc): ns per launch, native stacks
#   zero2_ab     (not run unless JOBS names it) ZeRO-2 with step blocks paused and on inside one
#                process (gpt2_zero2.py --ab AB_STEP_PAIRS, default 10 pairs of 3 steps)
#   launch_ab, native_ab  (not run unless JOBS names them) the launch loop and the native loop
#           measured inside one traced process: AB_PAIRS pairs of blocks with the CUDA
#           callbacks on and off (streamrace_bench_pause), the median of the pairs'
#           differences in µs per op / ns per launch; the machine's drift between processes
#           cancels out. Only the traced and floor configurations run them (untraced has no pause).
# Configurations, interleaved within every round (the order rotates from round to round):
#   untraced        the job alone
#   streamrace      `streamrace run -o DIR -- job` (default tier, STREAMRACE_STACKS=auto)
#   nostacks        the same with STREAMRACE_STACKS=none
#   noblocks        the same with STREAMRACE_TORCH_ALLOCATOR=0 (no caching-allocator block events)
#   nomemo          the same with STREAMRACE_LAUNCH_MEMO=0 (every launch's arguments scanned)
#   tscclock        the same with STREAMRACE_HOST_CLOCK=tsc (records timed by the scaled counter)
#   monoclock       the same with STREAMRACE_HOST_CLOCK=monotonic (clock_gettime per record: the
#                   default until session 41, auto since)
#   chunk64, chunk256, chunk1024  the same with STREAMRACE_CHUNK_KIB=N (a thread's record buffer
#                   handed to the flusher every N KiB instead of 4096)
#   nodefer         the same with STREAMRACE_DEFER_SCAN=0 (arguments scanned on the launching
#                   thread, as before 2026-12-05; the default leaves the scan to the flusher)
#   cut1..cut6      the default tier with STREAMRACE_BENCH_CUT=1..6 (docs/tracer.md): a launch's callback
#                   stops at CUPTI's callback (1), after the call's lookup (2), before the stack (3),
#                   before the record (4), at CUPTI's callback after a locked add to the sequence
#                   counter (5); 6 records everything, each sequence number taken without a locked
#                   add; the differences take the per-launch cost apart
#   rtlaunch        the default tier with STREAMRACE_RUNTIME_LAUNCHES=1 (kernel launches through the
#                   runtime's callbacks too, as before 2026-12-02: four callbacks per launch)
#   oldstacks       the default tier with the stack paths of before 2026-12-01's caches:
#                   STREAMRACE_PYTHON_SITES=0 (the C API walk every call) and
#                   STREAMRACE_NATIVE_UNWIND=dwarf (a DWARF walk every call)
#   floor_domains   an empty CUPTI subscriber (bench/cupti_floor) with the runtime and driver
#                   API domains enabled, through CUDA_INJECTION64_PATH
#   floor_cbids     the empty subscriber with only the callback ids the tracer enables
#                   (bench/cupti_floor/tracer_cbids.sh, from tracer/cuda_call_table.cpp: every
#                   row but the runtime's kernel launches; FLOOR_CBIDS overrides). Runs 56-62
#                   (06bfe67 to session 39) had a list without the driver's kernel launches
#                   (SR_DRL rows): their floor_cbids took no launch callbacks
#   floor_rtcbids   the same with the runtime's kernel launch ids too (what rtlaunch enables)
#   baseline     `streamrace` with another libstreamrace.so (BASELINE_LIB): a same-run A/B
#   baseline_selftime  `selftime` with another libstreamrace.so (BASELINE_LIB, e.g. the one of the
#                   commit before a change): the tracer's own time of both, part by part, in one run
#   confirmwin      the window `run --confirm` re-runs: precise mode on the kernels of one
#                   possible finding only (CONFIRM_KERNELS, a --precise regex; default the
#                   BF16 elementwise add of ZeRO-2's former false finding)
#
#   bash bench/realistic_overhead.sh            # on the GPU machine, from the repo root
#
# Env (all optional):
#   STREAMRACE   the streamrace CLI (default gpu-carry/bin/streamrace, else build/bin/streamrace);
#                its libstreamrace.so is found next to it (../lib) or through STREAMRACE_LIB
#   ROUNDS       rounds (default 3)
#   STEPS        timed steps of the GPT-2 jobs (default 60); WARMUP untimed steps first (10)
#   OPS          ops per repeat of the launch loop (default 20000); REPEATS (default 5)
#   AB_PAIRS     pairs of the _ab jobs (default 30); AB_OPS ops per block of launch_ab (default
#                5000), AB_LAUNCHES launches per block of native_ab (default 20000)
#   DEADLINE_S   wall-clock budget of the whole script (default 540); a run that would not fit
#                (judged by the last run of the same job and configuration) is skipped and
#                listed as skipped; every run is under `timeout` with what is left
#   RUN_TIMEOUT_S  cap on one run (default 240)
#   JOBS         default "launch zero2" (add fsdp2 to run it too)
#   CONFIGS      default "untraced streamrace nostacks floor_domains floor_cbids"
#   OUT          where the results go (default /tmp/realistic_overhead): realistic_overhead.md,
#                realistic_overhead.json, realistic_overhead_logs.tar.gz
#   PYTHON       default python3 (the one that has torch)
#   DS_VERSION   DeepSpeed from .whl/realistic installed by samples/realistic/setup_env.sh
#                (default 0.19.0); SKIP_DS_SETUP=1 uses whatever deepspeed PYTHONPATH gives
#   CUPTI_FLOOR_LIB  a prebuilt libcupti_floor.so (default: built now with g++ by
#                bench/cupti_floor/build.sh, else gpu-carry/lib/libcupti_floor.so)
#   FLOOR_CBIDS  a CUPTI_FLOOR_CBIDS list or @FILE for floor_cbids
#   BASELINE_LIB the libstreamrace.so of baseline and baseline_selftime (skipped without it)
#   CONFIRM_KERNELS  the --precise regex of confirmwin (default 'CUDAFunctor_add<c10::BFloat16>')
#   DRY_RUN=1    no GPU: run the tiny CPU variants of the jobs (tests this script's plumbing)
#   PIN          a CPU list (taskset -c PIN) every run is pinned to, e.g. PIN=2-5: the process, its
#                threads and the tracer's flusher stay on those CPUs, so that runs of one
#                configuration differ less by where the scheduler put them (default: not pinned)
#   PAIR_REF     the configuration the per-round differences are taken against (default
#                baseline when it ran, else streamrace): for every other configuration of a
#                job, the difference to PAIR_REF in each round, its median, min–max and the
#                rounds it was lower in (runs of one round ran back to back, so the machine's
#                drift between rounds cancels out of the differences). The in-process jobs
#                (*_ab) also list, round by round, the paused blocks' value beside what each
#                configuration added, so that a round on a slowed host shows as one
#   REPORT_ONLY  a directory holding raw.tsv and machine.txt (the logs/ of an earlier run's
#                realistic_overhead_logs.tar.gz): runs nothing, writes that run's results again
#                into OUT with this script's tables
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1
unset CUDA_INJECTION64_PATH STREAMRACE_STACKS STREAMRACE_OUT STREAMRACE_DISABLE STREAMRACE_TORCH_ALLOCATOR

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO" || exit 2
T_START=$(date +%s)
DEADLINE_S=${DEADLINE_S:-540}
DEADLINE_AT=$((T_START + DEADLINE_S))
ROUNDS=${ROUNDS:-3}
STEPS=${STEPS:-60}
WARMUP=${WARMUP:-10}
OPS=${OPS:-20000}
REPEATS=${REPEATS:-5}
RUN_TIMEOUT_S=${RUN_TIMEOUT_S:-240}
JOBS=${JOBS:-"launch zero2"}
CONFIGS=${CONFIGS:-"untraced streamrace nostacks floor_domains floor_cbids"}
OUT=${OUT:-/tmp/realistic_overhead}
CONFIRM_KERNELS=${CONFIRM_KERNELS:-'CUDAFunctor_add<c10::BFloat16>'}
PYTHON=${PYTHON:-python3}
DRY_RUN=${DRY_RUN:-0}
MARGIN_S=${MARGIN_S:-15}   # kept back for writing the results
W=$(mktemp -d /tmp/realistic_overhead.XXXXXX)
RAW="$W/raw.tsv"
NOTES="$W/notes.txt"
mkdir -p "$OUT" "$W/logs" "$W/traces"
: > "$RAW"; : > "$NOTES"
for v in ROUNDS STEPS WARMUP OPS REPEATS DEADLINE_S RUN_TIMEOUT_S; do
    [[ "${!v}" =~ ^[0-9]+$ ]] || { echo "realistic_overhead.sh: $v=${!v} is not a whole number" >&2; exit 2; }
done
(( ROUNDS >= 1 && STEPS >= 1 )) || { echo "realistic_overhead.sh: ROUNDS and STEPS must be >= 1" >&2; exit 2; }

note() { echo "$*" | tee -a "$NOTES" >&2; }
left() { echo $((DEADLINE_AT - $(date +%s))); }

PINCMD=()
if [[ -n "${PIN:-}" ]]; then
    taskset -c "$PIN" true 2>/dev/null || { echo "realistic_overhead.sh: PIN=$PIN is not a CPU list taskset can pin to on this machine" >&2; exit 2; }
    PINCMD=(taskset -c "$PIN")
fi
if [[ -n "${REPORT_ONLY:-}" ]]; then
    for f in raw.tsv machine.txt; do
        [[ -f "$REPORT_ONLY/$f" ]] || { echo "realistic_overhead.sh: REPORT_ONLY=$REPORT_ONLY has no $f" >&2; exit 2; }
    done
    cp "$REPORT_ONLY/raw.tsv" "$RAW"; cp "$REPORT_ONLY/machine.txt" "$W/machine.txt"
    # The run's own settings (its units), from its machine.txt.
    for v in STEPS WARMUP OPS REPEATS; do
        val=$(grep -oE "^settings:.* $v=[0-9]+" "$W/machine.txt" | grep -oE "$v=[0-9]+\$" | cut -d= -f2)
        [[ -n "$val" ]] && printf -v "$v" '%s' "$val"
    done
    note "results written again from $REPORT_ONLY (nothing was run)"
    JOBS=""
fi

# ---- the streamrace CLI
HAVE_SR=0 HAVE_FLOOR=0 FLOOR="" STREAMRACE=${STREAMRACE:-}
if [[ -z "${REPORT_ONLY:-}" ]]; then  # (a re-report runs nothing)
if [[ -z "${STREAMRACE:-}" ]]; then
    for c in gpu-carry/bin/streamrace build/bin/streamrace; do [[ -x "$c" ]] && { STREAMRACE="$REPO/$c"; break; }; done
fi
STREAMRACE=${STREAMRACE:-}
HAVE_SR=1
if [[ -z "$STREAMRACE" || ! -x "$STREAMRACE" ]]; then
    note "no streamrace CLI (STREAMRACE='$STREAMRACE'): the streamrace and nostacks configurations are skipped"
    HAVE_SR=0
elif ! "$STREAMRACE" --version > "$W/streamrace_version.txt" 2>&1; then
    note "$STREAMRACE --version failed: $(head -c 300 "$W/streamrace_version.txt")"
fi

# ---- the empty CUPTI subscriber
FLOOR=${CUPTI_FLOOR_LIB:-}
if [[ -z "$FLOOR" ]]; then
    if bash bench/cupti_floor/build.sh "$W/cupti_floor" > "$W/logs/cupti_floor_build.log" 2>&1; then
        FLOOR="$W/cupti_floor/libcupti_floor.so"
    elif [[ -f gpu-carry/lib/libcupti_floor.so ]]; then
        FLOOR="$REPO/gpu-carry/lib/libcupti_floor.so"
        note "bench/cupti_floor/build.sh failed here ($(tail -n1 "$W/logs/cupti_floor_build.log")); using the carried $FLOOR"
    fi
fi
HAVE_FLOOR=1
if [[ -z "$FLOOR" || ! -f "$FLOOR" ]]; then
    if [[ -n "${CUPTI_FLOOR_LIB:-}" ]]; then why="CUPTI_FLOOR_LIB=$CUPTI_FLOOR_LIB is no file"
    else why="build failed: $(tail -n1 "$W/logs/cupti_floor_build.log" 2>/dev/null)"; fi
    note "no libcupti_floor.so ($why): the floor configurations are skipped"
    HAVE_FLOOR=0
fi
fi
CBID_FILE="$W/floor_cbids.txt"
if [[ -n "${FLOOR_CBIDS:-}" ]]; then
    if [[ "$FLOOR_CBIDS" == @* ]]; then cp "${FLOOR_CBIDS#@}" "$CBID_FILE"; else echo "$FLOOR_CBIDS" > "$CBID_FILE"; fi
else
    # The tracer's call table (bench/cupti_floor/tracer_cbids.sh): what it enables by default,
    # and the same with the runtime's kernel launches for floor_rtcbids.
    bash bench/cupti_floor/tracer_cbids.sh > "$CBID_FILE" 2> "$W/logs/tracer_cbids.log" ||
        { note "bench/cupti_floor/tracer_cbids.sh failed ($(tail -n1 "$W/logs/tracer_cbids.log")): the floor_cbids configurations are skipped"; : > "$CBID_FILE"; }
fi
CBID_RT_FILE="$W/floor_rtcbids.txt"
{ cat "$CBID_FILE"  # floor_rtcbids: the list, and the runtime's kernel launches the tracer adds with runtime_launches
  RUNTIME_LAUNCHES=1 bash bench/cupti_floor/tracer_cbids.sh 2>/dev/null | grep -vxF -f <(bash bench/cupti_floor/tracer_cbids.sh 2>/dev/null)
} > "$CBID_RT_FILE"
N_CBIDS=$(grep -c . "$CBID_FILE" || true)
[[ "$N_CBIDS" -gt 0 ]] || { note "no callback ids for floor_cbids: it is skipped"; CONFIGS=${CONFIGS//floor_cbids/}; }

# ---- DeepSpeed (zero2 only)
HAVE_DS=1
if [[ " $JOBS " == *" zero2 "* || " $JOBS " == *" zero2_ab "* ]]; then
    if [[ "${SKIP_DS_SETUP:-0}" != 1 ]]; then
        if envline=$(PYTHON="$PYTHON" bash samples/realistic/setup_env.sh --print-env 2> "$W/logs/setup_env.log" | tail -n1) &&
           [[ "$envline" == "export PYTHONPATH="* ]]; then
            eval "$envline"
            export PYTHONPATH
        else
            note "samples/realistic/setup_env.sh failed ($(tail -n1 "$W/logs/setup_env.log")): the zero2 job is skipped"
            HAVE_DS=0
        fi
    fi
fi

# ---- the machine
if [[ -z "${REPORT_ONLY:-}" ]]; then  # (a re-report keeps the run's own machine.txt)
{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "host: $(hostname) $(uname -r); $(sed -n "s/^PRETTY_NAME=//p" /etc/os-release 2>/dev/null | tr -d "\"")"
    echo "cpus: $(nproc)"
    # The host's processor and clock: the loop's cost moves with them between hosts of one GPU kind.
    cpuinfo() { sed -n "s/^$1[[:space:]]*: //p" /proc/cpuinfo 2>/dev/null | head -n1; }
    echo "cpu: $(cpuinfo "model name") (family $(cpuinfo "cpu family") model $(cpuinfo model), $(cpuinfo "cpu MHz") MHz);" \
         "clocksource $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null || echo "?")"
    if command -v nvidia-smi >/dev/null; then
        echo "gpu: $(nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader 2>&1 | head -n 4 | paste -sd ';')"
    else
        echo "gpu: no nvidia-smi"
    fi
    "$PYTHON" - <<'PYEOF' 2>&1
import importlib
try:
    import torch
    cuda = torch.cuda.is_available()
    print(f"torch: {torch.__version__} cuda {torch.version.cuda} available {cuda}"
          + (f" device {torch.cuda.get_device_name(0)}" if cuda else "")
          + (f" nccl {'.'.join(map(str, torch.cuda.nccl.version()))}" if cuda else ""))
except Exception as e:  # noqa: BLE001
    print(f"torch: not importable ({e})")
for m in ("deepspeed", "transformers", "pydantic"):
    try:
        mod = importlib.import_module(m)
        print(f"{m}: {getattr(mod, '__version__', getattr(mod, 'VERSION', '?'))} ({mod.__file__})")
    except Exception as e:  # noqa: BLE001
        print(f"{m}: not importable ({type(e).__name__}: {str(e)[:200]})")
PYEOF
    echo "streamrace: ${STREAMRACE:-none} $(head -n1 "$W/streamrace_version.txt" 2>/dev/null)"
    echo "cupti_floor: ${FLOOR:-none}; floor_cbids: $N_CBIDS callback ids"
    echo "repo: $(git rev-parse --short HEAD 2>/dev/null) $(git status --porcelain 2>/dev/null | grep -qv '^??' && echo '(modified)')"
    echo "settings: ROUNDS=$ROUNDS STEPS=$STEPS WARMUP=$WARMUP OPS=$OPS REPEATS=$REPEATS DEADLINE_S=$DEADLINE_S RUN_TIMEOUT_S=$RUN_TIMEOUT_S JOBS='$JOBS' DRY_RUN=$DRY_RUN PIN='${PIN:-}'"
} > "$W/machine.txt"
fi
cat "$W/machine.txt" >&2
if [[ -n "$JOBS" && "$DRY_RUN" != 1 ]] && ! "$PYTHON" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    note "torch sees no GPU: nothing is measured (DRY_RUN=1 runs the CPU variants)"
    JOBS=""
fi

# ---- jobs
job_cmd() {  # job -> the command words, one a line
    local tiny=() dev=()
    [[ "$DRY_RUN" == 1 ]] && { tiny=(--device cpu --tiny --seq 32 --batch 2); dev=(--device cpu); }
    case $1 in
        native) printf '%s\n' "$W/bin/launch_bench" "${NATIVE_OPS:-100000}" ;;
        zero2)  printf '%s\n' "$PYTHON" samples/realistic/gpt2_zero2.py --steps "$STEPS" --warmup "$WARMUP" "${tiny[@]}" ;;
        fsdp2)  printf '%s\n' "$PYTHON" samples/realistic/gpt2_fsdp2.py --steps "$STEPS" --warmup "$WARMUP" "${tiny[@]}" ;;
        launch) printf '%s\n' "$PYTHON" samples/realistic/launch_loop.py --ops "$OPS" --repeats "$REPEATS" "${dev[@]}" ;;
        zero2_ab) printf '%s\n' "$PYTHON" samples/realistic/gpt2_zero2.py --warmup "$WARMUP" --ab "${AB_STEP_PAIRS:-10}" "${tiny[@]}" ;;
        launch_ab) printf '%s\n' "$PYTHON" samples/realistic/launch_loop.py --ops "${AB_OPS:-5000}" --ab "${AB_PAIRS:-30}" "${dev[@]}" ;;
        native_ab) printf '%s\n' "$W/bin/launch_bench" "${AB_LAUNCHES:-20000}" ab "${AB_PAIRS:-30}" ;;
    esac
}
job_metric() {
    case $1 in launch) echo us_per_op ;; native) echo launch_ns_per_call ;; launch_ab) echo ab_added_us ;; zero2_ab) echo ab_added_ms ;;
               native_ab) echo ab_added_ns ;; *) echo median_step_ms ;; esac
}
job_units() {  # what the trace size is divided by: steps or ops the process ran
    case $1 in launch) echo $((OPS * (REPEATS + 1))) ;; native) echo $((${NATIVE_OPS:-100000} + 1000)) ;;
        zero2_ab) echo $((WARMUP + 2 * ${AB_STEP_PAIRS:-10} * 3)) ;;  # paused steps included (they add no records)
        launch_ab) echo $((${AB_OPS:-5000} * (2 * ${AB_PAIRS:-30} + 2))) ;;
        *) echo $((STEPS + WARMUP)) ;; esac
}
first_guess() { case $1 in launch|native|*_ab) echo 30 ;; *) echo 90 ;; esac; }  # seconds, before a run was seen

declare -A EST
run_one() {  # job cfg round
    local job=$1 cfg=$2 round=$3 key="$1/$2"
    local est=${EST[$key]:-$(first_guess "$job")} remaining
    remaining=$(left)
    if (( remaining - MARGIN_S < est )); then
        printf '%s\t%s\t%s\tskipped\t\t\t\t\t\tdeadline: %ss left, a run takes about %ss\n' \
            "$round" "$job" "$cfg" "$remaining" "$est" >> "$RAW"
        note "round $round $job $cfg: skipped (deadline: ${remaining}s left, about ${est}s needed)"
        return
    fi
    [[ "$job" == *_ab && "$cfg" == untraced ]] && return  # nothing to pause
    local t=$((remaining - MARGIN_S)); (( t > RUN_TIMEOUT_S )) && t=$RUN_TIMEOUT_S
    local tag="${job}_${cfg}_r${round}" cmd
    local tdir="$W/traces/$tag" log="$W/logs/$tag.log"
    mapfile -t cmd < <(job_cmd "$job")
    mkdir -p "$tdir"
    local t0 t1 rc
    t0=$(date +%s.%N)
    case $cfg in
        untraced)      timeout -k 10 "$t" "${PINCMD[@]}" "${cmd[@]}" ;;
        streamrace)    STREAMRACE_PYTHON_SITES=2 timeout -k 10 "$t" "${PINCMD[@]}" "$STREAMRACE" run --no-color -o "$tdir" -- "${cmd[@]}" ;;
        selftime)      STREAMRACE_PYTHON_SITES=2 STREAMRACE_SELF_TIME=1 timeout -k 10 "$t" "${PINCMD[@]}" "$STREAMRACE" run --no-color -o "$tdir" -- "${cmd[@]}" ;;
        baseline)      STREAMRACE_LIB="$BASELINE_LIB" STREAMRACE_PYTHON_SITES=2 \
                           timeout -k 10 "$t" "${PINCMD[@]}" "$STREAMRACE" run --no-color -o "$tdir" -- "${cmd[@]}" ;;
        baseline_selftime) STREAMRACE_LIB="$BASELINE_LIB" STREAMRACE_PYTHON_SITES=2 STREAMRACE_SELF_TIME=1 \
                           timeout -k 10 "$t" "${PINCMD[@]}" "$STREAMRACE" run --no-color -o "$tdir" -- "${cmd[@]}" ;;
        oldstacks)     STREAMRACE_PYTHON_SITES=0 STREAMRACE_NATIVE_UNWIND=dwarf timeout -k 10 "$t" "${PINCMD[@]}" "$STREAMRACE" run --no-color -o "$tdir" -- "${cmd[@]}" ;;
        nostacks)      STREAMRACE_STACKS=none timeout -k 10 "$t" "${PINCMD[@]}" "$STREAMRACE" run --no-color -o "$tdir" -- "${cmd[@]}" ;;
        noblocks)      STREAMRACE_TORCH_ALLOCATOR=0 timeout -k 10 "$t" "${PINCMD[@]}" "$STREAMRACE" run --no-color -o "$tdir" -- "${cmd[@]}" ;;
        nomemo)        STREAMRACE_LAUNCH_MEMO=0 STREAMRACE_PYTHON_SITES=2 timeout -k 10 "$t" "${PINCMD[@]}" "$STREAMRACE" run --no-color -o "$tdir" -- "${cmd[@]}" ;;
        tscclock)      STREAMRACE_HOST_CLOCK=tsc STREAMRACE_PYTHON_SITES=2 timeout -k 10 "$t" "${PINCMD[@]}" "$STREAMRACE" run --no-color -o "$tdir" -- "${cmd[@]}" ;;
        monoclock)     STREAMRACE_HOST_CLOCK=monotonic STREAMRACE_PYTHON_SITES=2 timeout -k 10 "$t" "${PINCMD[@]}" "$STREAMRACE" run --no-color -o "$tdir" -- "${cmd[@]}" ;;
        chunk64|chunk256|chunk1024) STREAMRACE_CHUNK_KIB=${cfg#chunk} STREAMRACE_PYTHON_SITES=2 timeout -k 10 "$t" "${PINCMD[@]}" "$STREAMRACE" run --no-color -o "$tdir" -- "${cmd[@]}" ;;
        nodefer)       STREAMRACE_DEFER_SCAN=0 STREAMRACE_PYTHON_SITES=2 timeout -k 10 "$t" "${PINCMD[@]}" "$STREAMRACE" run --no-color -o "$tdir" -- "${cmd[@]}" ;;
        nodefer_selftime) STREAMRACE_DEFER_SCAN=0 STREAMRACE_PYTHON_SITES=2 STREAMRACE_SELF_TIME=1 \
                           timeout -k 10 "$t" "${PINCMD[@]}" "$STREAMRACE" run --no-color -o "$tdir" -- "${cmd[@]}" ;;
        cut[1-6])      STREAMRACE_BENCH_CUT=${cfg#cut} STREAMRACE_PYTHON_SITES=2 timeout -k 10 "$t" "${PINCMD[@]}" "$STREAMRACE" run --no-color -o "$tdir" -- "${cmd[@]}" ;;
        rtlaunch)      STREAMRACE_RUNTIME_LAUNCHES=1 timeout -k 10 "$t" "${PINCMD[@]}" "$STREAMRACE" run --no-color -o "$tdir" -- "${cmd[@]}" ;;
        confirmwin)    STREAMRACE_PYTHON_SITES=2 timeout -k 10 "$t" "${PINCMD[@]}" "$STREAMRACE" run --no-color --precise="$CONFIRM_KERNELS" \
                           -o "$tdir" -- "${cmd[@]}" ;;
        floor_domains) CUDA_INJECTION64_PATH="$FLOOR" CUPTI_FLOOR_MODE=domains timeout -k 10 "$t" "${PINCMD[@]}" "${cmd[@]}" ;;
        floor_cbids)   CUDA_INJECTION64_PATH="$FLOOR" CUPTI_FLOOR_MODE=cbids CUPTI_FLOOR_CBIDS="@$CBID_FILE" \
                           timeout -k 10 "$t" "${PINCMD[@]}" "${cmd[@]}" ;;
        floor_rtcbids) CUDA_INJECTION64_PATH="$FLOOR" CUPTI_FLOOR_MODE=cbids CUPTI_FLOOR_CBIDS="@$CBID_RT_FILE" \
                           timeout -k 10 "$t" "${PINCMD[@]}" "${cmd[@]}" ;;
    esac > "$log" 2>&1
    rc=$?
    t1=$(date +%s.%N)
    local wall metric bytes="" files="" info="" status=ok
    wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f", b-a}')
    metric=$(grep -oE "^$(job_metric "$job") -?[0-9.]+" "$log" | tail -n1 | cut -d' ' -f2)
    [[ "$job" == *_ab ]] && info="$(grep -E '^ab_(on|off)_(us|ns|ms) |^ab_added_pct ' "$log" | tr '\n' ' ')$(grep -m1 -oE 'o[f]+_won [0-9/]+|off won [0-9]+' "$log" || true)"
    case $cfg in
        streamrace|nostacks|noblocks|nomemo|tscclock|monoclock|chunk64|chunk256|chunk1024|nodefer|nodefer_selftime|rtlaunch|oldstacks|selftime|baseline|baseline_selftime|confirmwin|cut[1-6])
            bytes=$(du -sb "$tdir" | cut -f1)
            files=$(find "$tdir" -name '*.srace' | wc -l)
            if [[ "$files" -eq 0 ]]; then
                info="no .srace trace written"
                [[ "$DRY_RUN" == 1 ]] || status=invalid   # the job ran untraced: its number means nothing
            fi
            info="${info:+$info; }$(grep -m1 -E '^streamrace run: [0-9]+ traces? in' "$log" || true)"
            info="${info:+$info; }$(grep -m1 -oE 'python call sites: .*' "$log" || true)"
            info="${info:+$info; }$(grep -m1 -oE 'self time \(.*' "$log" || true)"
            info="${info:+$info; }$(grep -m1 -oE 'precise mode: [0-9]+ modules patched.*' "$log" || true)" ;;
        floor_*)
            info="${info:+$info; }$(grep -m1 -oE 'cupti_floor: .*' "$log" || echo "no cupti_floor line: the subscriber did not start")"
            [[ "$info" == *" enabled"* && "$info" != *"nothing enabled"* ]] || status=invalid ;;
    esac
    if (( rc == 124 || rc == 137 )); then status=timeout
    elif [[ -z "$metric" ]]; then status=failed
    fi
    [[ "$status" == ok && "$rc" != 0 ]] && info="${info:+$info; }exit $rc"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "$job" "$cfg" "$status" "$rc" "$wall" "$metric" \
        "$bytes" "$files" "${info//$'\t'/ }" >> "$RAW"
    echo "round $round $job $cfg: $status rc=$rc wall=${wall}s $(job_metric "$job")=${metric:-?} trace_bytes=${bytes:-} ${info:0:160}" >&2
    if [[ "$status" != ok ]]; then
        note "round $round $job $cfg: $status (rc=$rc); log tail: $(tail -n 3 "$log" | tr '\n' ' ' | cut -c1-400)"
    fi
    EST[$key]=$(awk -v w="$wall" 'BEGIN{printf "%d", w*1.15 + 5}')
    # Keep one trace directory listing, not the traces (they are large), except where a traced
    # run reported findings (exit 1): those traces go into the logs tarball to be looked at.
    ls -l "$tdir" > "$W/logs/$tag.trace_ls" 2>/dev/null
    if [[ "$rc" == 1 && "$cfg" != untraced && "$cfg" != floor_* ]] && [[ -n "$(ls -A "$tdir" 2>/dev/null)" ]]; then
        mkdir -p "$W/logs/kept" && mv "$tdir" "$W/logs/kept/$tag"
        note "round $round $job $cfg: exit 1 (findings): its traces are kept in the logs tarball (kept/$tag)"
    fi
    rm -rf "$tdir"
}

cfgs=()
for c in $CONFIGS; do
    case $c in
        untraced) ;;
        streamrace|nostacks|noblocks|nomemo|tscclock|monoclock|chunk64|chunk256|chunk1024|nodefer|nodefer_selftime|rtlaunch|oldstacks|selftime|confirmwin|cut[1-6]) (( HAVE_SR )) || continue ;;
        baseline|baseline_selftime)
            (( HAVE_SR )) || continue
            [[ -n "${BASELINE_LIB:-}" && -f "${BASELINE_LIB:-}" ]] || { note "$c skipped: BASELINE_LIB='${BASELINE_LIB:-}' is not a file"; continue; } ;;
        floor_domains|floor_cbids|floor_rtcbids) (( HAVE_FLOOR )) || continue ;;
        *) note "unknown configuration '$c' ignored"; continue ;;
    esac
    cfgs+=("$c")
done
jobs_run=()
for j in $JOBS; do
    case $j in
        zero2|zero2_ab) (( HAVE_DS )) || continue ;;
        fsdp2|launch|launch_ab) ;;
        native|native_ab)
            [[ "$DRY_RUN" == 1 ]] && { note "$j: no GPU in a dry run, skipped"; continue; }
            [[ -x "$W/bin/launch_bench" ]] && { jobs_run+=("$j"); continue; }
            mkdir -p "$W/bin"
            if ! nvcc -O2 -arch=sm_90 -std=c++17 -cudart shared -Xlinker -rpath,/usr/local/cuda/lib64 \
                    -o "$W/bin/launch_bench" samples/cuda/launch_bench.cu > "$W/logs/launch_bench.nvcc.log" 2>&1; then
                note "native: nvcc failed ($(tail -n1 "$W/logs/launch_bench.nvcc.log")), skipped"; continue
            fi ;;
        *) note "unknown job '$j' ignored"; continue ;;
    esac
    jobs_run+=("$j")
done

for ((r = 1; r <= ROUNDS; r++)); do
    for job in "${jobs_run[@]}"; do
        n=${#cfgs[@]}
        for ((i = 0; i < n; i++)); do
            run_one "$job" "${cfgs[$(((i + r - 1) % n))]}" "$r"
        done
    done
done

# ---- results
"$PYTHON" - "$RAW" "$W/machine.txt" "$NOTES" "$OUT" "$STEPS" "$WARMUP" "$OPS" "$REPEATS" "$T_START" "${NATIVE_OPS:-100000}" <<'PYEOF'
import json, os, re, statistics, sys, time
raw, machine, notes, out = sys.argv[1:5]
steps, warmup, ops, repeats, t_start, native_ops = map(int, sys.argv[5:11])
rows = []
for line in open(raw):
    f = line.rstrip("\n").split("\t")
    f += [""] * (10 - len(f))
    r = dict(round=int(f[0]), job=f[1], config=f[2], status=f[3], rc=int(f[4]) if f[4] else None,
             wall_s=float(f[5]) if f[5] else None, value=float(f[6]) if f[6] else None,
             trace_bytes=int(f[7]) if f[7] else None, trace_files=int(f[8]) if f[8] else None, info=f[9])
    units = ops * (repeats + 1) if r["job"] == "launch" else native_ops + 1000 if r["job"] == "native" else steps + warmup
    r["units"] = units
    r["trace_bytes_per_unit"] = r["trace_bytes"] / units if r["trace_bytes"] is not None else None
    rows.append(r)
order = ["untraced", "streamrace", "baseline", "rtlaunch", "selftime", "baseline_selftime", "oldstacks", "nostacks", "noblocks", "nomemo", "tscclock", "monoclock", "chunk64", "chunk256", "chunk1024", "nodefer", "nodefer_selftime", "cut1", "cut5", "cut2", "cut3", "cut4", "cut6", "confirmwin", "floor_domains",
         "floor_cbids", "floor_rtcbids"]
what = {"untraced": "untraced", "streamrace": "`streamrace run` (default)", "nostacks": "`streamrace run`, STREAMRACE_STACKS=none",
        "noblocks": "`streamrace run`, STREAMRACE_TORCH_ALLOCATOR=0",
        "nomemo": "`streamrace run`, STREAMRACE_LAUNCH_MEMO=0",
        "tscclock": "`streamrace run`, STREAMRACE_HOST_CLOCK=tsc",
        "monoclock": "`streamrace run`, STREAMRACE_HOST_CLOCK=monotonic",
        "chunk64": "`streamrace run`, STREAMRACE_CHUNK_KIB=64 (a thread's records handed over every 64 KiB)",
        "chunk256": "`streamrace run`, STREAMRACE_CHUNK_KIB=256",
        "chunk1024": "`streamrace run`, STREAMRACE_CHUNK_KIB=1024",
        "nodefer": "`streamrace run`, STREAMRACE_DEFER_SCAN=0 (the scan on the launching thread)",
        "nodefer_selftime": "`streamrace run`, STREAMRACE_DEFER_SCAN=0, STREAMRACE_SELF_TIME=1",
        "cut1": "`streamrace run`, STREAMRACE_BENCH_CUT=1 (callbacks stop at CUPTI's callback)",
        "cut2": "`streamrace run`, STREAMRACE_BENCH_CUT=2 (launches stop after the call's lookup)",
        "cut3": "`streamrace run`, STREAMRACE_BENCH_CUT=3 (launches stop before the stack)",
        "cut4": "`streamrace run`, STREAMRACE_BENCH_CUT=4 (launches stop before the record)",
        "cut5": "`streamrace run`, STREAMRACE_BENCH_CUT=5 (callbacks stop at CUPTI's callback after a locked add)",
        "cut6": "`streamrace run`, STREAMRACE_BENCH_CUT=6 (every record, its sequence number without a locked add)",
        "rtlaunch": "`streamrace run`, STREAMRACE_RUNTIME_LAUNCHES=1 (launches through the runtime's callbacks too)",
        "floor_rtcbids": "empty CUPTI subscriber, the tracer's cbid list with the runtime's launches",
        "confirmwin": "the --confirm window: `streamrace run --precise=CONFIRM_KERNELS`",
        "selftime": "`streamrace run`, STREAMRACE_SELF_TIME=1 (the default, its own time measured)",
        "baseline": "`streamrace run` with BASELINE_LIB's tracer (an earlier build, same settings)",
        "baseline_selftime": "`streamrace run`, STREAMRACE_SELF_TIME=1, BASELINE_LIB's tracer",
        "oldstacks": "`streamrace run`, stacks as before the caches (PYTHON_SITES=0, NATIVE_UNWIND=dwarf)",
        "floor_domains": "empty CUPTI subscriber, runtime+driver domains", "floor_cbids": "empty CUPTI subscriber, the tracer's cbid list"}
jobs = []
for r in rows:
    if r["job"] not in jobs:
        jobs.append(r["job"])
summary = {}
for job in jobs:
    for cfg in order:
        rs = [r for r in rows if r["job"] == job and r["config"] == cfg]
        if not rs:
            continue
        ok = [r for r in rs if r["status"] == "ok" and r["value"] is not None]
        vals = [r["value"] for r in ok]
        tb = [r["trace_bytes_per_unit"] for r in ok if r["trace_bytes_per_unit"] is not None]
        summary[(job, cfg)] = dict(n=len(vals), runs=len(rs), median=statistics.median(vals) if vals else None,
                                   min=min(vals) if vals else None, max=max(vals) if vals else None,
                                   trace_bytes_per_unit=statistics.median(tb) if tb else None,
                                   not_ok=[f"r{r['round']} {r['status']}" for r in rs if r not in ok])
md = ["# Tracer overhead on realistic jobs", ""]
md.append(f"Per configuration: the median over rounds of each run's own median, and the spread (min–max) "
          f"over rounds. GPT-2 jobs: median wall ms per step ({steps} timed steps after {warmup}); "
          f"launch loop: median µs per `x.add_(1)` ({repeats} repeats of {ops} ops after one). "
          f"Trace bytes: size of the trace directory divided by all steps (warm-up included) or all ops the "
          f"process ran (so it includes start-up records). Configurations interleave within each round.")
md.append("")
md.append("## Machine")
md.append("")
md += ["    " + l.rstrip() for l in open(machine)]
md.append("")
for job in jobs:
    unit = {"launch": "µs/op", "native": "ns/launch", "launch_ab": "µs/op added (in-process pairs)",
            "zero2_ab": "ms/step added (in-process pairs)",
            "native_ab": "ns/launch added (in-process pairs)"}.get(job, "ms/step")
    per = "B/op" if job == "launch" else "B/launch" if job == "native" else "B/step"
    title = {"zero2": "GPT-2 124M, DeepSpeed ZeRO-2 (one rank)", "fsdp2": "GPT-2 124M, FSDP2 (one rank)",
             "launch": "launch-bound loop (x.add_(1))",
             "native": "native launch loop (samples/cuda/launch_bench.cu, empty kernels)",
             "launch_ab": "launch-bound loop, callbacks on/off inside one process (launch_loop.py --ab)",
             "zero2_ab": "GPT-2 124M ZeRO-2, tracer paused/on by blocks of steps inside one process (gpt2_zero2.py --ab)",
             "native_ab": "native launch loop, callbacks on/off inside one process (launch_bench ab)"}.get(job, job)
    md += [f"## {title}", "", f"| configuration | median {unit} | spread (min–max) | vs untraced | added {unit} | trace {per} | runs ok |",
           "| --- | --- | --- | --- | --- | --- | --- |"]
    base = summary.get((job, "untraced"), {}).get("median")
    for cfg in order:
        s = summary.get((job, cfg))
        if s is None:
            continue
        if s["median"] is None:
            md.append(f"| {what[cfg]} | – | – | – | – | – | 0/{s['runs']} ({', '.join(s['not_ok'])}) |")
            continue
        rel = f"{(s['median'] / base - 1) * 100:+.1f} %" if base else "–"
        add = f"{s['median'] - base:+.3f}" if base else "–"
        tb = f"{s['trace_bytes_per_unit']:,.0f}" if s["trace_bytes_per_unit"] is not None else "–"
        ok = f"{s['n']}/{s['runs']}" + (f" ({', '.join(s['not_ok'])})" if s["not_ok"] else "")
        md.append(f"| {what[cfg]} | {s['median']:.3f} | {s['min']:.3f}–{s['max']:.3f} | {rel if cfg != 'untraced' else ''} "
                  f"| {add if cfg != 'untraced' else ''} | {tb} | {ok} |")
    md.append("")
    # Per-round differences against one configuration: a round's runs ran back to back.
    by_round = {}
    for r in rows:
        if r["job"] == job and r["status"] == "ok" and r["value"] is not None:
            by_round.setdefault(r["config"], {})[r["round"]] = r["value"]
    ref = os.environ.get("PAIR_REF") or ("baseline" if "baseline" in by_round else "streamrace")
    others = [c for c in order if c in by_round and c != ref and c != "untraced"]
    if ref in by_round and others:
        pair_rows = []
        for cfg in others:
            rounds = sorted(set(by_round[cfg]) & set(by_round[ref]))
            if not rounds:
                continue
            d = [by_round[cfg][k] - by_round[ref][k] for k in rounds]
            lower = sum(1 for x in d if x < 0)
            pair_rows.append(f"| {what[cfg]} | {statistics.median(d):+.3f} | {min(d):+.3f}–{max(d):+.3f} | {lower} of {len(d)} "
                             f"| {', '.join(f'{x:+.3f}' for x in d)} |")
        if pair_rows:
            md += [f"Per-round differences against {what.get(ref, ref)} (the configuration's value minus the "
                   f"reference's in the same round; PAIR_REF chooses the reference):", "",
                   f"| configuration | median difference, {unit} | min–max | lower in | each round |",
                   "| --- | --- | --- | --- | --- |"] + pair_rows + [""]
    # The in-process jobs, round by round: the paused blocks' value (the host's own speed then)
    # beside what each configuration added. A slow host's step stops being GPU-bound, and the
    # tracer's CPU time then shows in full (realistic_overhead.md, session 45).
    paused_re = re.compile(r"ab_on_(?:ms|us|ns) [0-9.]+ ab_off_(ms|us|ns) ([0-9.]+)")
    round_rows = []
    for r in sorted((r for r in rows if r["job"] == job and r["status"] == "ok" and r["value"] is not None),
                    key=lambda r: (r["round"], order.index(r["config"]) if r["config"] in order else len(order))):
        m = paused_re.search(r["info"])
        if m is None:
            continue
        paused = float(m.group(2))
        pct = re.search(r"ab_added_pct ([-0-9.]+)", r["info"])  # zero2_ab's own figure, where it gives one
        share = (f"{float(pct.group(1)):+.2f} %" if pct else f"{r['value'] / paused * 100:+.2f} %" if paused > 0 else "–")
        paused_unit = {"us": "µs"}.get(m.group(1), m.group(1))
        round_rows.append(f"| {r['round']} | {what.get(r['config'], r['config'])} | {paused:.3f} {paused_unit} "
                          f"| {r['value']:.3f} | {share} |")
    if round_rows:
        md += ["Each round: the paused blocks' value (this host's own speed then) and what the configuration added "
               "(read a round's figures against its paused value: a slower host shows more of the tracer's CPU time):", "",
               f"| round | configuration | paused | added, {unit} | per cent of paused |",
               "| --- | --- | --- | --- | --- |"] + round_rows + [""]
# Where the tracer's own time goes (selftime runs): per part, calls and time per unit of the job.
self_re = re.compile(r"(cupti|nccl|allocator|python|native|scan|record|facts|lookup|hash) ([0-9]+) calls ([0-9.]+) ms")
self_rows = {}
for r in rows:
    if r["config"] not in ("selftime", "baseline_selftime") or r["status"] != "ok":
        continue
    parts = {m.group(1): (int(m.group(2)), float(m.group(3))) for m in self_re.finditer(r["info"])}
    if parts:
        label = r["job"] + (" (BASELINE_LIB)" if r["config"] == "baseline_selftime" else "")
        self_rows.setdefault(label, []).append((r, parts))
if self_rows:
    md += ["## Where the tracer's own time goes (`selftime` runs)", "",
           "STREAMRACE_SELF_TIME=1 times the tracer's code on the thread that runs it (time-stamp counter): "
           "`cupti` is all of the CUDA callbacks (stacks included), `python` and `native` the stacks inside them "
           "and the NCCL calls, `scan` and `record` a kernel launch's argument scan and its record (inside `cupti`). CUPTI's own dispatch is outside it (the empty subscriber measures that). "
           "Medians over the runs; per unit = per step (GPT-2 jobs), per op (launch loop) or per launch (native).", "",
           "| job | part | calls per unit | ns per call | µs per unit |", "| --- | --- | --- | --- | --- |"]
    for job, runs in self_rows.items():
        for part in ["cupti", "nccl", "allocator", "python", "native", "scan", "record", "facts", "lookup", "hash"]:
            vals = [(p[part][0] / r["units"], p[part][1] * 1e6 / p[part][0] if p[part][0] else 0.0, p[part][1] * 1e3 / r["units"])
                    for r, p in runs if part in p]
            if not vals or all(v[0] == 0 for v in vals):
                continue
            med = [statistics.median(v[i] for v in vals) for i in range(3)]
            md.append(f"| {job} | {part} | {med[0]:.2f} | {med[1]:.0f} | {med[2]:.3f} |")
    md.append("")
note_lines = [l.rstrip() for l in open(notes) if l.strip()]
# The tracer's summary line (python_sites=2) says when learned native walks gave up: those runs
# paid DWARF walks (session 40: a C++ loop's launch 14.5 µs instead of ~0.7), worth a note.
slow_re = re.compile(r"native walks: [^;]*, ([0-9]+) learned, ([0-9]+) dwarf[^;]*; (fast walks given up: [^;]*)")
for r in rows:
    m = slow_re.search(r["info"])
    if m and int(m.group(2)) > int(m.group(1)):
        note_lines.append(f"round {r['round']} {r['job']} {r['config']}: native stacks mostly took the DWARF walk "
                          f"({m.group(1)} learned, {m.group(2)} dwarf): {m.group(3)}")
md += ["## Skipped, failed and other notes", ""] + ([f"- {l}" for l in note_lines] or ["- none"])
md += ["", f"Total wall time of the script: {time.time() - t_start:.0f} s.", ""]
with open(os.path.join(out, "realistic_overhead.md"), "w") as f:
    f.write("\n".join(md))
doc = {"machine": [l.rstrip() for l in open(machine)], "settings": dict(steps=steps, warmup=warmup, ops=ops, repeats=repeats),
       "runs": rows, "notes": note_lines,
       "summary": [dict(job=j, config=c, **s) for (j, c), s in summary.items()]}
with open(os.path.join(out, "realistic_overhead.json"), "w") as f:
    json.dump(doc, f, indent=1)
print("\n".join(md))
PYEOF
cp "$RAW" "$W/logs/raw.tsv"; cp "$CBID_FILE" "$CBID_RT_FILE" "$W/logs/"; cp "$W/machine.txt" "$W/logs/"
tar -C "$W" -czf "$OUT/realistic_overhead_logs.tar.gz" logs
echo "realistic_overhead.sh: results in $OUT (realistic_overhead.md, .json, _logs.tar.gz); $(( $(date +%s) - T_START ))s" >&2
rm -rf "$W"
