#!/usr/bin/env bash
# `cmake --install` into a fresh prefix: the files a user gets (bin/streamrace,
# lib/libstreamrace.so, precise mode's device callbacks when built, the docs), and the
# installed `streamrace run` preloads the installed library, found from its own binary.
#   install_test.sh CMAKE BUILD_DIR SOURCE_DIR PRECISE_BUILT(0|1)
set -u
cmake=$1 build=$2 src=$3 precise=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fail=1; }
p="$tmp/prefix"
if ! "$cmake" --install "$build" --prefix "$p" >"$tmp/log" 2>&1; then cat "$tmp/log"; bad "cmake --install"; exit 1; fi
want=(bin/streamrace lib/libstreamrace.so share/doc/streamrace/README.md share/doc/streamrace/tracer.md
      share/doc/streamrace/reports.md)
[ "$precise" = 1 ] && want+=(lib/streamrace_precise_patches.fatbin)
for f in "${want[@]}"; do [ -s "$p/$f" ] && ok "installs $f" || bad "$f not installed"; done
[ -x "$p/bin/streamrace" ] && ok "bin/streamrace is executable" || bad "bin/streamrace is not executable"
out=$(env -u STREAMRACE_LIB "$p/bin/streamrace" --version 2>&1)
[ "$out" = "streamrace 0.1.0" ] && ok "installed --version" || bad "installed --version printed '$out'"
# The installed binary preloads the installed library, not the build tree's.
out=$(cd "$tmp" && env -u STREAMRACE_LIB -u LD_PRELOAD "$p/bin/streamrace" run -o "$tmp/t" -- sh -c 'echo "$LD_PRELOAD"' 2>"$tmp/err")
rc=$?
[ "$rc" = 0 ] && [ "$out" = "$p/lib/libstreamrace.so" ] && ok "installed run preloads $p/lib/libstreamrace.so" ||
  { bad "installed run: exit $rc, LD_PRELOAD '$out'"; cat "$tmp/err"; }
# Through a symbolic link to the binary (as a package manager's bin/ shim would be).
mkdir -p "$tmp/elsewhere" && ln -s "$p/bin/streamrace" "$tmp/elsewhere/streamrace"
out=$(env -u STREAMRACE_LIB -u LD_PRELOAD "$tmp/elsewhere/streamrace" run -o "$tmp/t" -- sh -c 'echo "$LD_PRELOAD"' 2>/dev/null)
[ "$out" = "$p/lib/libstreamrace.so" ] && ok "a link to the installed binary finds lib/" || bad "via a link: LD_PRELOAD '$out'"
# A copy without its lib/ says what is missing (exit 2).
cp "$p/bin/streamrace" "$tmp/elsewhere/lonely"
err=$(env -u STREAMRACE_LIB "$tmp/elsewhere/lonely" run -o "$tmp/t" -- true 2>&1)
rc=$?
[ "$rc" = 2 ] && [ "$err" = "streamrace run: libstreamrace.so not found next to the streamrace binary (../lib); set STREAMRACE_LIB" ] &&
  ok "no lib/: exit 2 and the message" || bad "no lib/: exit $rc, '$err'"
# The installed analyzer on the bundled recording.
"$p/bin/streamrace" analyze --no-color "$src/samples/traces" >"$tmp/report" 2>"$tmp/err"
rc=$?
[ "$rc" = 1 ] && grep -q "^streamrace: 4 races (4 certain, 0 possible) in 4 traces, 606 occurrences$" "$tmp/report" &&
  ok "installed analyze samples/traces: exit 1, 4 races in 4 traces" || { bad "installed analyze: exit $rc"; tail -3 "$tmp/report"; }
exit $fail
