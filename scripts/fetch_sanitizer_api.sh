#!/usr/bin/env bash
# Fetches the Compute Sanitizer API headers for building precise mode without a CUDA toolkit
# copy of compute-sanitizer/: the `nvidia-cuda-sanitizer-api` wheel of CUDA 13.0 from the
# Python package index, unpacked under DEST. Prints the directory to pass as
# -DSTREAMRACE_SANITIZER_ROOT, or exits 1 (with the reason on stderr) when it cannot.
#   scripts/fetch_sanitizer_api.sh DEST
set -euo pipefail
dest=${1:?usage: fetch_sanitizer_api.sh DEST}
version=13.0.85
root="$dest/v$version/nvidia/cu13"
if [ -f "$root/include/sanitizer_patching.h" ]; then
  echo "$root"
  exit 0
fi
mkdir -p "$dest/dl"
if ! python3 -m pip download --quiet --no-deps --only-binary=:all: --dest "$dest/dl" \
    "nvidia-cuda-sanitizer-api==$version" >"$dest/dl/pip.log" 2>&1; then
  echo "fetch_sanitizer_api: pip download of nvidia-cuda-sanitizer-api==$version failed (see $dest/dl/pip.log)" >&2
  exit 1
fi
wheel=$(ls "$dest"/dl/nvidia_cuda_sanitizer_api-"$version"-*.whl 2>/dev/null | head -1)
[ -n "$wheel" ] || { echo "fetch_sanitizer_api: no wheel in $dest/dl" >&2; exit 1; }
python3 - "$wheel" "$dest/v$version" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    z.extractall(sys.argv[2], [n for n in z.namelist() if "/include/" in n])
PY
[ -f "$root/include/sanitizer_patching.h" ] || { echo "fetch_sanitizer_api: unexpected wheel layout" >&2; exit 1; }
echo "$root"
