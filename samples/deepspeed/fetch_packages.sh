#!/usr/bin/env bash
# Fetch everything the GPU machine needs to run DeepSpeed 0.14.2 / 0.14.3 offline, into
# <repo>/.whl/ (ignored by git; carried to the GPU machine with `carry: [".whl"]`).
# Run on a machine that reaches PyPI.  Needs python3 with pip and venv.
#
#   bash samples/deepspeed/fetch_packages.sh            # -> .whl/  (about 8 MiB)
#
# What and why:
#   deepspeed-0.14.{2,3}.tar.gz     the sdists, as published (kept for provenance / fallback)
#   deepspeed-0.14.{2,3}-py3-none-any.whl
#                                   built here from those sdists with DS_BUILD_OPS=0: pure
#                                   Python, no compiled ops, no torch needed to build, so the
#                                   GPU machine only unpacks them (setup_env.sh)
#   hjson, pydantic 2.7.4 + pydantic-core 2.18.4 (cp312 manylinux) + annotated-types
#                                   imported by DeepSpeed and missing from the GPU image.
#                                   pydantic 2.7 needs only typing-extensions>=4.6.1 (there);
#                                   DeepSpeed 0.14 uses its pydantic.v1 API via deepspeed/pydantic_v1.py.
# Everything else DeepSpeed imports (torch, numpy, packaging, psutil, py-cpuinfo, tqdm, ninja,
# nvidia-ml-py) is already on the GPU image (device KINDS.md package list).
set -euo pipefail
set -x

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
DEST="${DEST:-$REPO/.whl}"
DS_VERSIONS="${DS_VERSIONS:-0.14.2 0.14.3}"
PY="${PYTHON:-python3}"

mkdir -p "$DEST"
# Keep the folder out of git (the repo's .gitignore also lists /.whl/).
if [[ -d "$REPO/.git" ]] && ! grep -qxF '/.whl/' "$REPO/.git/info/exclude" 2>/dev/null; then
    mkdir -p "$REPO/.git/info" && echo '/.whl/' >> "$REPO/.git/info/exclude"
fi

for v in $DS_VERSIONS; do
    "$PY" -m pip download -q --no-deps --no-binary :all: -d "$DEST" "deepspeed==$v"
done

# Pure-Python / cp312 manylinux wheels for the GPU machine's Python 3.12.
"$PY" -m pip download -q --no-deps --only-binary=:all: \
    --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d "$DEST" \
    hjson==3.1.0 pydantic==2.7.4 pydantic-core==2.18.4 annotated-types==0.7.0

# Build pure-Python DeepSpeed wheels from the sdists, in a throw-away venv that has only
# setuptools + wheel: DeepSpeed's setup.py works without torch (it then skips op building).
BUILD_VENV="$(mktemp -d)/venv"
"$PY" -m venv "$BUILD_VENV"
"$BUILD_VENV/bin/python" -m pip install -q "setuptools<70" wheel
for v in $DS_VERSIONS; do
    rm -f "$DEST/deepspeed-$v-py3-none-any.whl"
    DS_BUILD_OPS=0 "$BUILD_VENV/bin/python" -m pip wheel -q --no-deps --no-build-isolation \
        -w "$DEST" "$DEST/deepspeed-$v.tar.gz"
    test -f "$DEST/deepspeed-$v-py3-none-any.whl"
done
rm -rf "$(dirname "$BUILD_VENV")"

(cd "$DEST" && sha256sum ./*.whl ./*.tar.gz > SHA256SUMS)
set +x
echo "fetch_packages.sh: $(du -sh "$DEST" | cut -f1) in $DEST"
ls -l "$DEST"
