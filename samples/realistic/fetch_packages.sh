#!/usr/bin/env bash
# Fetch what the GPU machine needs to run the realistic samples' DeepSpeed job offline, into
# <repo>/.whl/realistic/ (ignored by git through /.whl/; carried with `carry: [".whl"]`).
# Run on a machine that reaches PyPI.  Needs python3 with pip and venv.
#
#   bash samples/realistic/fetch_packages.sh        # -> .whl/realistic/  (about 8 MiB)
#
# What and why:
#   deepspeed-<v>.tar.gz             the sdists as published (provenance, and setup_env.sh's
#                                    fallback when a wheel is missing)
#   deepspeed-<v>-py3-none-any.whl   built here from the sdist with DS_BUILD_OPS=0: pure Python,
#                                    no compiled ops (ZeRO-2 with torch.optim.AdamW needs none),
#                                    no torch needed to build
#   pydantic 2.x + the pydantic-core it pins (cp312 manylinux x86_64) + annotated-types +
#   typing-inspection (pydantic >= 2.11 needs it) + hjson
#                                    DeepSpeed >= 0.17 needs them; the GPU image has none of them
#   typing-extensions                pydantic needs a recent one; setup_env.sh installs it only
#                                    when the image's is older than pydantic asks
# Everything else DeepSpeed requires (torch, numpy, packaging, psutil, py-cpuinfo, tqdm, ninja,
# einops, msgpack) is on the GPU image (device KINDS.md package list); check_deps.py checks it.
#
# Env: DS_VERSIONS (default "0.19.0 0.19.8": 0.19.0 is the one the bench uses by default,
#      0.19.8 the newest 0.19.x, carried as a fallback), PYDANTIC_VERSION (default 2.11.10),
#      DEST, PYTHON.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
DEST="${DEST:-$REPO/.whl/realistic}"
DS_VERSIONS="${DS_VERSIONS:-0.19.0 0.19.8}"
PYDANTIC_VERSION="${PYDANTIC_VERSION:-2.11.10}"
PY="${PYTHON:-python3}"

mkdir -p "$DEST"
if ! git -C "$REPO" check-ignore -q "$DEST" 2>/dev/null; then
    echo "fetch_packages.sh: warning: $DEST is not ignored by git (.gitignore should list /.whl/)" >&2
fi

# One version of each package in the folder: two would stop the offline install.
rm -f "$DEST"/pydantic-*.whl "$DEST"/pydantic_core-*.whl "$DEST"/annotated_types-*.whl \
      "$DEST"/typing_inspection-*.whl "$DEST"/typing_extensions-*.whl "$DEST"/hjson-*.whl

set -x
for v in $DS_VERSIONS; do
    [[ -f "$DEST/deepspeed-$v.tar.gz" ]] ||
        "$PY" -m pip download -q --no-deps --no-binary :all: -d "$DEST" "deepspeed==$v"
done

WHEEL_OPTS=(--no-deps --only-binary=:all: --python-version 3.12 --implementation cp --abi cp312
            --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64
            --platform manylinux_2_28_x86_64 --platform any)
"$PY" -m pip download -q "${WHEEL_OPTS[@]}" -d "$DEST" "pydantic==$PYDANTIC_VERSION"
set +x

# pydantic pins its pydantic-core exactly; read the pin and the other needs from its metadata.
meta_requires() {  # wheel -> "name spec" lines, extras and markers-for-other-pythons dropped
    "$PY" - "$1" <<'PYEOF'
import re, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
    for line in z.read(meta).decode().splitlines():
        if not line.startswith("Requires-Dist:"):
            continue
        req = line.split(":", 1)[1].strip()
        if "extra ==" in req:
            continue
        req = req.split(";")[0].strip()
        m = re.match(r"([A-Za-z0-9_.-]+)\s*(?:\[[^\]]*\])?\s*\(?([^)]*)\)?", req)
        print(m.group(1).lower().replace("_", "-"), m.group(2).replace(" ", ""))
PYEOF
}
PYD_WHEEL="$(ls "$DEST"/pydantic-"$PYDANTIC_VERSION"-*.whl)"
CORE_PIN="$(meta_requires "$PYD_WHEEL" | awk '$1=="pydantic-core"{print $2}')"
[[ "$CORE_PIN" == ==* ]] || { echo "fetch_packages.sh: pydantic $PYDANTIC_VERSION pins no pydantic-core ($CORE_PIN)" >&2; exit 2; }
echo "fetch_packages.sh: pydantic $PYDANTIC_VERSION wants pydantic-core$CORE_PIN"

set -x
"$PY" -m pip download -q "${WHEEL_OPTS[@]}" -d "$DEST" \
    "pydantic-core$CORE_PIN" "annotated-types>=0.6.0" "typing-inspection>=0.4.0" "typing-extensions>=4.14.1" \
    "hjson==3.1.0"
set +x

# Build pure-Python DeepSpeed wheels from the sdists in a throw-away venv that has only
# setuptools + wheel: DeepSpeed's setup.py runs without torch and then builds no ops.
BUILD_DIR="$(mktemp -d)"
trap 'rm -rf "$BUILD_DIR"' EXIT
"$PY" -m venv "$BUILD_DIR/venv"
"$BUILD_DIR/venv/bin/python" -m pip install -q "setuptools<70" wheel
for v in $DS_VERSIONS; do
    rm -f "$DEST/deepspeed-$v-py3-none-any.whl"
    DS_BUILD_OPS=0 "$BUILD_DIR/venv/bin/python" -m pip wheel -q --no-deps --no-build-isolation \
        -w "$DEST" "$DEST/deepspeed-$v.tar.gz"
    test -f "$DEST/deepspeed-$v-py3-none-any.whl"
    # A pure-Python wheel has no compiled extension in it.
    if unzip -l "$DEST/deepspeed-$v-py3-none-any.whl" | grep -q '\.so$'; then
        echo "fetch_packages.sh: deepspeed $v wheel holds compiled files" >&2; exit 2
    fi
done

(cd "$DEST" && sha256sum ./*.whl ./*.tar.gz > SHA256SUMS)
echo "fetch_packages.sh: $(du -sh "$DEST" | cut -f1) in $DEST"
ls -l "$DEST"
# The carried wheels plus the GPU image's packages must satisfy every wheel's needs.
"$PY" "$HERE/check_deps.py" "$DEST"
