#!/usr/bin/env bash
# `streamrace run --precise` in a build with precise mode, without a GPU: the checks made
# before anything runs (exit 2 with the reason), --precise=auto's kernel list from a recorded
# run, and that a process which never uses CUDA gets no trace and no message.
#   precise_cli_test.sh STREAMRACE LIBSTREAMRACE DATA_DIR
set -u
sr=$1 lib=$2 data=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
check() {  # name want_rc want_stderr_substring rc stderr_file
  local name=$1 want_rc=$2 want=$3 rc=$4 err=$5
  if [ "$rc" != "$want_rc" ]; then echo "FAIL $name: exit $rc, want $want_rc"; cat "$err"; fail=1; return; fi
  if [ -n "$want" ] && ! grep -qF -- "$want" "$err"; then echo "FAIL $name: stderr lacks '$want'"; cat "$err"; fail=1; return; fi
  echo "ok   $name"
}

"$sr" run -o "$tmp/a" --precise=auto -- /bin/true 2>"$tmp/e1"
check "auto without an earlier run" 2 "holds no trace (*.srace); run once without --precise" $? "$tmp/e1"

"$sr" run -o "$tmp/b" '--precise=([' -- /bin/true 2>"$tmp/e2"
check "bad kernel regex" 2 "--precise=([: not a valid kernel-name regex" $? "$tmp/e2"

"$sr" run -o "$tmp/c" --precise=all -- /bin/true 2>"$tmp/e3"
check "no CUDA in the command" 0 "no process of the command used CUDA" $? "$tmp/e3"
if ls "$tmp/c"/*.srace >/dev/null 2>&1; then echo "FAIL no CUDA: a trace was written"; fail=1; fi

STREAMRACE_PRECISE=all STREAMRACE_OUT="$tmp/d" LD_PRELOAD="$lib" /bin/true 2>"$tmp/e4"
check "preloaded, no CUDA" 0 "" $? "$tmp/e4"
if [ -s "$tmp/e4" ]; then echo "FAIL preloaded, no CUDA: printed"; cat "$tmp/e4"; fail=1; fi

# --precise=auto resolved from the recorded default-mode run of the narrow() views sample:
# exactly the two kernels of its possible finding.
"$sr" run -o "$tmp/e" --precise=auto --precise-from "$data/torch_views_racy_default" -- /bin/true 2>"$tmp/e5"
check "auto from a recorded run" 0 "patching the 2 kernels named in possible findings" $? "$tmp/e5"
if ! grep -q "FillFunctor" "$tmp/e/precise-kernels.txt" || ! grep -q "reduce_kernel" "$tmp/e/precise-kernels.txt" ||
   [ "$(wc -l <"$tmp/e/precise-kernels.txt")" != 2 ]; then
  echo "FAIL auto kernel list:"; cat "$tmp/e/precise-kernels.txt"; fail=1
else
  echo "ok   auto kernel list"
fi

# A recorded run whose only finding is certain has nothing to confirm: default mode.
"$sr" run -o "$tmp/f" --precise=auto --precise-from "$data/torch_views_racy_precise" -- /bin/true 2>"$tmp/e6"
check "auto with nothing to confirm" 0 "has no possible kernel finding to confirm; tracing in the default mode" $? "$tmp/e6"
exit $fail
