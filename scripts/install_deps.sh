#!/usr/bin/env bash
# Installs the Debian packages streamrace builds with, when they are missing.
# The CUDA toolkit (CUPTI and NCCL headers for the tracer) is expected under /usr/local/cuda;
# without it everything but libstreamrace.so still builds.
set -euo pipefail
packages=(cmake g++ make pkg-config libfmt-dev libcli11-dev nlohmann-json3-dev libzstd-dev zlib1g-dev
          libxxhash-dev libgtest-dev libunwind-14-dev python3 python3-jsonschema)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "streamrace: installing ${missing[*]}" >&2
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
