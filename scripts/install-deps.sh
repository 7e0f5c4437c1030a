#!/usr/bin/env bash
# Installs everything headlab needs from Debian 12's apt. Safe to re-run: fast when all is present.
# libopenblas0-pthread is installed next to the OpenMP build on purpose: it keeps the system's
# default libblas.so.3 (used by PyTorch and numpy) the pthread build, while headlab links the
# OpenMP build from its own directory (see CMakeLists.txt).
set -euo pipefail
packages=(
  build-essential cmake ninja-build pkg-config ccache
  libdnnl-dev ocl-icd-opencl-dev
  libopenblas-openmp-dev libopenblas0-pthread
  libfmt-dev libspdlog-dev doctest-dev libtomlplusplus-dev libcli11-dev nlohmann-json3-dev
  python3 python3-numpy
)
if [[ "${1:-}" == "--bench" ]]; then packages+=(python3-torch); fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo_cmd=(); [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
fi
