#!/usr/bin/env bash
# `streamrace run` and the tracer settings (tracer/tracer_settings.h): --help lists each one,
# and the traced command sees the resolved values: a run option over STREAMRACE_<NAME>, that
# over STREAMRACE_OPTIONS, that over the default; STREAMRACE_OPTIONS itself is not passed on.
#   run_settings_test.sh STREAMRACE LIBSTREAMRACE
set -u
sr=$1 lib=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
check() {  # name want got
  if [ "$2" == "$3" ]; then echo "ok   $1"; else printf 'FAIL %s\n  want: %s\n  got:  %s\n' "$1" "$2" "$3"; fail=1; fi
}
clean=(env -u STREAMRACE_OPTIONS -u STREAMRACE_STACKS -u STREAMRACE_TIMING -u STREAMRACE_OUT -u STREAMRACE_PRECISE
       -u STREAMRACE_DISABLE -u STREAMRACE_TORCH_ALLOCATOR -u STREAMRACE_HOST_ACCESSES
       -u STREAMRACE_RING -u STREAMRACE_STEPS -u STREAMRACE_WINDOW -u STREAMRACE_STEP_RANGE STREAMRACE_LIB="$lib")
probe='echo "out=$STREAMRACE_OUT stacks=${STREAMRACE_STACKS-unset} timing=${STREAMRACE_TIMING-unset} options=${STREAMRACE_OPTIONS-unset}"'
cd "$tmp"

help=$("$sr" run --help)
for line in \
  "  out=DIR  (STREAMRACE_OUT, -o DIR; default streamrace-traces under run, else .)" \
  "  stacks=auto|native|python|none  (STREAMRACE_STACKS, --stacks MODE; default auto)" \
  "  python_sites=0|1|2  (STREAMRACE_PYTHON_SITES, --python-sites 0|1|2; default 1)" \
  "  native_unwind=cached|dwarf  (STREAMRACE_NATIVE_UNWIND, --native-unwind cached|dwarf; default cached)" \
  "  kernel_signatures=0|1  (STREAMRACE_KERNEL_SIGNATURES, --kernel-signatures 0|1; default 1)" \
  "  launch_memo=0|1  (STREAMRACE_LAUNCH_MEMO, --launch-memo 0|1; default 1)" \
  "  defer_scan=0|1  (STREAMRACE_DEFER_SCAN, --defer-scan 0|1; default 1)" \
  "  timing=0|1  (STREAMRACE_TIMING, --timing; default 0)" \
  "  host_accesses=0|1  (STREAMRACE_HOST_ACCESSES, --host-accesses; default 0)" \
  "  torch_allocator=0|1  (STREAMRACE_TORCH_ALLOCATOR, --torch-allocator 0|1; default 1)" \
  "  step_range=NAME  (STREAMRACE_STEP_RANGE, --step-range NAME; default (none))" \
  "  steps=A:B|A:  (STREAMRACE_STEPS, --steps A:B; default (all))" \
  "  window=nvtx:NAME|profiler  (STREAMRACE_WINDOW, --window nvtx:NAME|profiler; default (all))" \
  "  ring=N  (STREAMRACE_RING, --ring N; default (off))" \
  "  launch_corpus=PATH[:SKIP[:COUNT]]  (STREAMRACE_LAUNCH_CORPUS; default (off))" \
  "  self_time=0|1  (STREAMRACE_SELF_TIME; default 0)" \
  "  bench_cut=0|1|2|3|4|5|6  (STREAMRACE_BENCH_CUT; default 0)" \
  "  disable=0|1  (STREAMRACE_DISABLE; default 0)" \
  "  precise=all|regex:RE|names:FILE  (STREAMRACE_PRECISE, --precise[=all|auto|REGEX]; default (off))" \
  "  precise_start=load|init  (STREAMRACE_PRECISE_START, --precise-start WHEN; default load)" \
  "  precise_patches=FILE  (STREAMRACE_PRECISE_PATCHES, --precise-patches FILE; default streamrace_precise_patches.fatbin next to the library)" \
  "  precise_module_filter=0|1  (STREAMRACE_PRECISE_MODULE_FILTER, --precise-module-filter 0|1; default 1)" \
  "  precise_debug=0|1  (STREAMRACE_PRECISE_DEBUG, --precise-debug; default 0)"; do
  if grep -qxF -- "$line" <<<"$help"; then echo "ok   run --help: ${line%%=*}"; else echo "FAIL run --help lacks: $line"; fail=1; fi
done

# Everyday options first; the expert ones in an "Advanced:" section of their own.
adv=$(sed -n '/^Advanced:/,/^Tracer settings/p' <<<"$help")
everyday=$(sed -n '/^Options:/,/^Advanced:/p' <<<"$help")
for o in --keep-going --torch-allocator --python-sites --native-unwind --kernel-signatures --launch-memo --defer-scan --precise-start --precise-patches --precise-module-filter --precise-sample --precise-unpatch --precise-debug \
         --force-output --precise-from; do
  if grep -q -- "^  $o " <<<"$adv" && ! grep -q -- "^  $o " <<<"$everyday"; then echo "ok   run --help: $o is advanced"
  else echo "FAIL run --help: $o not in the Advanced section"; fail=1; fi
done
for o in -o,--output-dir --stacks --timing --precise --confirm --print-limit; do
  if grep -q -- "^  $o " <<<"$everyday"; then echo "ok   run --help: $o is everyday"; else echo "FAIL run --help: $o not among the options"; fail=1; fi
done
ahelp=$("$sr" analyze --help)
aadv=$(sed -n '/^Advanced:/,$p' <<<"$ahelp")
for o in --separate-host-threads --unknown-streams-blocking --kernel-extent-to-allocation-end --no-const-pointer-reads \
         --ignore-precise --force-output; do
  if grep -q -- "^  $o" <<<"$aadv"; then echo "ok   analyze --help: $o is advanced"; else echo "FAIL analyze --help: $o not advanced"; fail=1; fi
done

out=$("${clean[@]}" "$sr" run -- sh -c "$probe" 2>/dev/null)
check "defaults" "out=$tmp/streamrace-traces stacks=unset timing=unset options=unset" "$out"
out=$("${clean[@]}" STREAMRACE_OPTIONS="stacks=none timing=1 out=$tmp/o" "$sr" run -- sh -c "$probe" 2>/dev/null)
check "STREAMRACE_OPTIONS, resolved into variables" "out=$tmp/o stacks=none timing=1 options=unset" "$out"
out=$("${clean[@]}" STREAMRACE_OPTIONS="stacks=none out=$tmp/o" STREAMRACE_STACKS=python STREAMRACE_OUT="$tmp/v" \
  "$sr" run -- sh -c "$probe" 2>/dev/null)
check "a variable wins over STREAMRACE_OPTIONS" "out=$tmp/v stacks=python timing=unset options=unset" "$out"
out=$("${clean[@]}" STREAMRACE_OPTIONS="stacks=none out=$tmp/o" STREAMRACE_STACKS=python \
  "$sr" run --stacks native --timing -o "$tmp/x" -- sh -c "$probe" 2>/dev/null)
check "a run option wins over both" "out=$tmp/x stacks=native timing=1 options=unset" "$out"
out=$("${clean[@]}" "$sr" run --precise-start init --precise-module-filter 0 --precise-debug -- \
  sh -c 'echo "$STREAMRACE_PRECISE_START $STREAMRACE_PRECISE_MODULE_FILTER $STREAMRACE_PRECISE_DEBUG"' 2>/dev/null)
check "precise settings as options" "init 0 1" "$out"
out=$("${clean[@]}" "$sr" run --host-accesses -- sh -c 'echo "${STREAMRACE_HOST_ACCESSES-unset}"' 2>/dev/null)
check "--host-accesses" "1" "$out"
out=$("${clean[@]}" "$sr" run -- sh -c 'echo "${STREAMRACE_HOST_ACCESSES-unset}"' 2>/dev/null)
check "host_accesses off by default" "unset" "$out"
out=$("${clean[@]}" "$sr" run --torch-allocator 0 -- sh -c 'echo "${STREAMRACE_TORCH_ALLOCATOR-unset}"' 2>/dev/null)
check "--torch-allocator 0" "0" "$out"
out=$("${clean[@]}" "$sr" run --python-sites 0 -- sh -c 'echo "${STREAMRACE_PYTHON_SITES-unset}"' 2>/dev/null)
check "--python-sites 0" "0" "$out"
out=$("${clean[@]}" "$sr" run --native-unwind dwarf -- sh -c 'echo "${STREAMRACE_NATIVE_UNWIND-unset}"' 2>/dev/null)
check "--native-unwind dwarf" "dwarf" "$out"
out=$("${clean[@]}" STREAMRACE_OPTIONS="torch_allocator=0" "$sr" run -- sh -c 'echo "${STREAMRACE_TORCH_ALLOCATOR-unset}"' 2>/dev/null)
check "torch_allocator=0 in STREAMRACE_OPTIONS" "0" "$out"

err=$("${clean[@]}" STREAMRACE_OPTIONS="stacks=none bogus=1" "$sr" run -- true 2>&1)
rc=$?
check "unknown STREAMRACE_OPTIONS key: exit 2" "2: streamrace run: error: STREAMRACE_OPTIONS: unknown setting 'bogus' (known: out stacks python_sites native_unwind kernel_signatures launch_memo defer_scan timing runtime_launches host_accesses torch_allocator step_range steps window ring launch_corpus self_time bench_cut chunk_kib host_clock disable precise precise_start precise_patches precise_module_filter precise_debug precise_sample precise_unpatch precise_graph_nodes)" "$rc: $err"
err=$("${clean[@]}" "$sr" run --confirm --precise=all -- true 2>&1)
rc=$?
check "--confirm with --precise: exit 2" "2: streamrace run: --confirm chooses the kernels for precise mode itself; leave out --precise" "$rc: $err"
err=$("${clean[@]}" STREAMRACE_OPTIONS="stacks" "$sr" run -- true 2>&1)
rc=$?
check "a word without =: exit 2" "2: streamrace run: error: STREAMRACE_OPTIONS: 'stacks' is not KEY=VALUE" "$rc: $err"
err=$("${clean[@]}" "$sr" run --stacks nnone -- true 2>&1)
rc=$?
check "bad --stacks: exit 2" "2: streamrace run: error: stacks=nnone is not one of auto, native, python, none" "$rc: $err"
out=$("${clean[@]}" "$sr" run --ring 8 --step-range train_step -- sh -c 'echo "$STREAMRACE_RING $STREAMRACE_STEP_RANGE"' 2>/dev/null)
check "--ring 8 --step-range train_step" "8 train_step" "$out"
err=$("${clean[@]}" "$sr" run --ring 8 -- true 2>&1)
rc=$?
check "--ring without a step marker: exit 2" "2: streamrace run: error: ring counts steps: name the step marker with step_range=NAME (the NVTX range pushed once per step)" "$rc: $err"
err=$("${clean[@]}" STREAMRACE_OPTIONS="steps=9:3 step_range=s" "$sr" run -- true 2>&1)
rc=$?
check "an empty steps window: exit 2" "2: streamrace run: error: steps '9:3' is empty (B must be greater than A)" "$rc: $err"
err=$("${clean[@]}" "$sr" run --ring 2 --window profiler --step-range s -- true 2>&1)
rc=$?
check "ring with a window: exit 2" "2: streamrace run: error: ring cannot be combined with a window (steps, nvtx, profiler): a ring keeps the last N steps" "$rc: $err"
err=$("${clean[@]}" "$sr" run -o ringout -- sh -c 'mkdir -p ringout/h-1.srace.ring' 2>&1)
check "a ring left behind that cannot be salvaged is named" "streamrace run: warning: $tmp/ringout/h-1.srace.ring holds the ring of a process that died before it wrote its trace (killed?), and it could not be salvaged ($tmp/ringout/h-1.srace.ring/definitions.srace: cannot open: no such file or directory): its last steps are not analysed
streamrace run: no process of the command used CUDA: no trace was written in $tmp/ringout" "$err"
exit $fail
