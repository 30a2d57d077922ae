#!/usr/bin/env bash
# Install DeepSpeed (pure-Python wheel) and its missing needs offline on the GPU machine, into
# a target folder used through PYTHONPATH, so the image's torch/transformers stay the ones used.
# Input: <repo>/.whl/realistic/ as made by fetch_packages.sh (carried with `carry: [".whl"]`).
#
#   bash samples/realistic/setup_env.sh                 # -> /tmp/ds-realistic-0.19.0
#   DS_VERSION=0.19.8 bash samples/realistic/setup_env.sh
#   eval "$(bash samples/realistic/setup_env.sh --print-env)"   # install, then export PYTHONPATH
#
# Env: DS_VERSION (default 0.19.0), DS_TARGET (default /tmp/ds-realistic-$DS_VERSION),
#      WHL_DIR (default <repo>/.whl/realistic), PYTHON (default python3).
# The last line on stdout with --print-env is `export PYTHONPATH=...`; everything else goes
# to stderr. Exit 0 only when `import deepspeed` and its ZeRO-1/2 module load.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
WHL="${WHL_DIR:-$REPO/.whl/realistic}"
DS_VERSION="${DS_VERSION:-0.19.0}"
TARGET="${DS_TARGET:-/tmp/ds-realistic-$DS_VERSION}"
PY="${PYTHON:-python3}"
PRINT_ENV=0
[[ "${1:-}" == "--print-env" ]] && PRINT_ENV=1

log() { echo "setup_env.sh: $*" >&2; }
[[ -d "$WHL" ]] || { log "$WHL missing (run samples/realistic/fetch_packages.sh and carry .whl)"; exit 2; }

pick() {  # glob -> the one file, or exit
    local f
    f=$(compgen -G "$WHL/$1" | head -n1 || true)
    [[ -n "$f" ]] || { log "no $1 in $WHL"; exit 2; }
    echo "$f"
}

if [[ ! -f "$TARGET/.streamrace-ok" ]]; then
    rm -rf "$TARGET"; mkdir -p "$TARGET"
    wheel="$WHL/deepspeed-$DS_VERSION-py3-none-any.whl"
    if [[ ! -f "$wheel" ]]; then
        sdist="$(pick "deepspeed-$DS_VERSION.tar.gz")"
        build="$(mktemp -d)"
        log "no wheel for $DS_VERSION: building one from $sdist (DS_BUILD_OPS=0)"
        DS_BUILD_OPS=0 "$PY" -m pip wheel -q --no-index --no-deps --no-build-isolation -w "$build" "$sdist" >&2
        wheel="$(ls "$build"/deepspeed-"$DS_VERSION"-*.whl)"
    fi
    deps=("$(pick 'hjson-*.whl')" "$(pick 'pydantic-2*.whl')" "$(pick 'pydantic_core-*cp312*.whl')"
          "$(pick 'annotated_types-*.whl')" "$(pick 'typing_inspection-*.whl')")
    # typing-extensions: the image's is used unless it is older than the carried pydantic
    # stack needs (typing-inspection asks the most); then the carried one goes in the target.
    te_need=4.15.0
    if ! "$PY" - "$te_need" <<'PYEOF' >&2
import sys
from importlib.metadata import version, PackageNotFoundError
try:
    have = version("typing_extensions")
except PackageNotFoundError:
    sys.exit(1)
t = lambda v: tuple(int(x) for x in v.split(".")[:3] if x.isdigit())
print(f"setup_env.sh: image typing_extensions {have}")
sys.exit(0 if t(have) >= t(sys.argv[1]) else 1)
PYEOF
    then
        log "installing the carried typing_extensions (image's is missing or < $te_need)"
        deps+=("$(pick 'typing_extensions-*.whl')")
    fi
    # --no-deps: every need is either in this list or on the image (check_deps.py checked it).
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --disable-pip-version-check \
        --target "$TARGET" "$wheel" "${deps[@]}" >&2
    # Fail now, not in the middle of the bench, if a need is missing.
    PYTHONPATH="$TARGET${PYTHONPATH:+:$PYTHONPATH}" DS_ACCELERATOR=cuda "$PY" - "$DS_VERSION" >&2 <<'PYEOF'
import sys
import deepspeed
assert deepspeed.__version__.startswith(sys.argv[1]), deepspeed.__version__
import deepspeed.runtime.zero.stage_1_and_2  # noqa: F401
import pydantic, torch
print(f"setup_env.sh: deepspeed {deepspeed.__version__} from {deepspeed.__file__}; "
      f"pydantic {pydantic.VERSION}; torch {torch.__version__} from {torch.__file__}")
PYEOF
    touch "$TARGET/.streamrace-ok"
else
    log "$TARGET already installed"
fi
if (( PRINT_ENV )); then
    echo "export PYTHONPATH=$TARGET${PYTHONPATH:+:$PYTHONPATH}"
fi
