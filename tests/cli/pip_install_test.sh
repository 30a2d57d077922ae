#!/usr/bin/env bash
# `pip install .` into a fresh virtual environment (pyproject.toml, scikit-build-core): the
# `streamrace` console command and `python -m streamrace` run the installed binary, which finds
# the installed library. Builds the whole project once more (several minutes; later runs reuse
# build-python/), so it runs only with STREAMRACE_TEST_PIP=1 and is skipped (77) otherwise.
# Needs PyPI (or a pip configured with an index) for scikit-build-core.
#   STREAMRACE_TEST_PIP=1 pip_install_test.sh SOURCE_DIR
set -u
src=$1
if [ -z "${STREAMRACE_TEST_PIP:-}" ]; then echo "skipped: set STREAMRACE_TEST_PIP=1 to run it"; exit 77; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
check() {  # name want got
  if [ "$2" == "$3" ]; then echo "ok   $1"; else printf 'FAIL %s\n  want: %s\n  got:  %s\n' "$1" "$2" "$3"; fail=1; fi
}
python3 -m venv "$tmp/venv" || { echo "FAIL python3 -m venv (apt-get install python3-venv)"; exit 1; }
if ! "$tmp/venv/bin/pip" install "$src" >"$tmp/pip.log" 2>&1; then tail -40 "$tmp/pip.log"; echo "FAIL pip install"; exit 1; fi
echo "ok   pip install $src"
check "streamrace --version" "streamrace 0.1.0" "$("$tmp/venv/bin/streamrace" --version 2>&1)"
"$tmp/venv/bin/python" -m streamrace analyze --no-color "$src/samples/traces" >"$tmp/a" 2>&1
check "python -m streamrace analyze samples/traces" \
  "1 SUMMARY: streamrace: 4 races (4 certain, 0 possible) in 4 traces" "$? $(tail -1 "$tmp/a")"
pkg=$("$tmp/venv/bin/python" -c 'import streamrace, os; print(os.path.dirname(streamrace.binary()) + "/..")')
pkg=$(cd "$pkg" && pwd)
for f in bin/streamrace lib/libstreamrace.so share/doc/streamrace/README.md; do
  [ -s "$pkg/$f" ] && echo "ok   installs $f" || { echo "FAIL $f not in $pkg"; fail=1; }
done
out=$(cd "$tmp" && env -u STREAMRACE_LIB -u LD_PRELOAD "$tmp/venv/bin/python" -m streamrace run -- sh -c 'echo "$LD_PRELOAD"' 2>/dev/null)
check "python -m streamrace run -- CMD preloads the package's library" "$pkg/lib/libstreamrace.so" "$out"
exit $fail
