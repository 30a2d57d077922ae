#!/usr/bin/env bash
# Install DeepSpeed 0.14.2 and 0.14.3 side by side, offline, on the GPU machine.
# Input: <repo>/.whl/ as made by fetch_packages.sh (carried with `carry: [".whl"]`).
# Output: /tmp/ds-<version>/ per version (DeepSpeed + hjson + pydantic), used by debug.sh
#         through PYTHONPATH; nothing is installed into the system Python.
#
#   bash samples/deepspeed/setup_env.sh          # both versions
#   DS_VERSIONS=0.14.2 bash samples/deepspeed/setup_env.sh
#
# DeepSpeed comes from the pure-Python wheel built by fetch_packages.sh.  If that wheel is
# missing, the sdist is built here instead (pip wheel --no-index --no-build-isolation with
# DS_BUILD_OPS=0; needs setuptools + wheel, both on the GPU image).
set -euo pipefail
set -x

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
WHL="${WHL_DIR:-$REPO/.whl}"
DS_VERSIONS="${DS_VERSIONS:-0.14.2 0.14.3}"
PREFIX="${DS_PREFIX:-/tmp/ds-}"
PY="${PYTHON:-python3}"
PIP=("$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --disable-pip-version-check)

[[ -d "$WHL" ]] || { echo "setup_env.sh: $WHL missing (run fetch_packages.sh and carry .whl)" >&2; exit 2; }

DEPS=()
for pat in 'hjson-*.whl' 'pydantic-2*.whl' 'pydantic_core-*.whl' 'annotated_types-*.whl'; do
    f=$(ls "$WHL"/$pat 2>/dev/null | head -n1 || true)
    [[ -n "$f" ]] || { echo "setup_env.sh: no $pat in $WHL" >&2; exit 2; }
    DEPS+=("$f")
done

installed=()
for v in $DS_VERSIONS; do
    target="$PREFIX$v"
    if [[ -f "$target/.streamrace-ok" ]]; then
        echo "setup_env.sh: $target already installed"; continue
    fi
    rm -rf "$target"; mkdir -p "$target"
    wheel="$WHL/deepspeed-$v-py3-none-any.whl"
    if [[ ! -f "$wheel" ]]; then
        sdist="$WHL/deepspeed-$v.tar.gz"
        [[ -f "$sdist" ]] || { echo "setup_env.sh: neither $wheel nor $sdist" >&2; exit 2; }
        build="$(mktemp -d)"
        DS_BUILD_OPS=0 "$PY" -m pip wheel -q --no-index --no-deps --no-build-isolation -w "$build" "$sdist"
        wheel="$(ls "$build"/deepspeed-"$v"-*.whl)"
    fi
    "${PIP[@]}" --target "$target" "$wheel" "${DEPS[@]}"
    installed+=("$v")
done

# Import check with the shims, the way debug.sh runs it (no GPU needed); versions in parallel.
check() {
    local v=$1 target="$PREFIX$1"
    local rc=0
    PYTHONPATH="$HERE:$target" DS_ACCELERATOR=cuda "$PY" - "$v" > "$target/.import-check.log" 2>&1 <<'PYEOF' || rc=$?
import sys
import deepspeed
assert deepspeed.__version__.startswith(sys.argv[1]), deepspeed.__version__
import deepspeed.runtime.zero.stage_1_and_2, deepspeed.runtime.zero.stage3  # noqa: F401
import deepspeed.autotuning.scheduler, deepspeed.elasticity.elastic_agent     # noqa: F401
import pydantic
print(f"setup_env.sh: deepspeed {deepspeed.__version__} from {deepspeed.__file__}, pydantic {pydantic.VERSION}")
PYEOF
    tail -n 3 "$target/.import-check.log"
    (( rc == 0 )) && touch "$target/.streamrace-ok"
    return $rc
}
pids=()
for v in "${installed[@]}"; do check "$v" & pids+=($!); done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
exit $rc
