#!/usr/bin/env bash
# Installs everything headlab needs from Debian 12's apt. Safe to re-run: fast when all is present.
# libopenblas0-pthread is installed next to the OpenMP build on purpose: it keeps the system's
# default libblas.so.3 (used by PyTorch and numpy) the pthread build, while headlab links the
# OpenMP build from its own directory (see CMakeLists.txt). chromium, chromium-driver and
# python3-selenium run the reports' browser tests ("report: browser ..."); poppler-utils reads
# their printed PDFs (pdftotext) and npm fetches the accessibility engine they load into the
# pages (axe-core, pinned, into third_party/npm/ of the source tree, ignored by git).
set -euo pipefail
packages=(
  build-essential cmake ninja-build pkg-config ccache
  libdnnl-dev ocl-icd-opencl-dev
  libopenblas-openmp-dev libopenblas0-pthread
  libfmt-dev libspdlog-dev doctest-dev libtomlplusplus-dev libcli11-dev nlohmann-json3-dev
  libxxhash-dev
  python3 python3-numpy
  python3-dev pybind11-dev python3-pytest  # the Python module and its tests (docs/python.md)
  chromium chromium-driver python3-selenium
  poppler-utils
  libopenmpi-dev openmpi-bin  # data-parallel training and sweeps: mpirun (docs/distributed.md)
  slurm-wlm  # srun as the launcher: the tests run a one-node cluster ("dist: slurm: ...")
)
for flag in "$@"; do
  case "$flag" in
    --bench) packages+=(python3-torch) ;;
    # scripts/test-sanitize.sh and scripts/fuzz.sh: clang with libFuzzer and the sanitizer
    # runtimes, LLVM's OpenMP for clang builds, llvm-symbolizer for readable reports.
    --sanitize) packages+=(clang libclang-rt-14-dev libomp-14-dev llvm) ;;
    # scripts/check-format.sh: the formatter whose version the check pins.
    --format) packages+=(clang-format-14) ;;
    *) echo "install-deps.sh: unknown option '$flag' (expected --bench, --sanitize or --format)" >&2; exit 2 ;;
  esac
done
# Debian's npm, unless one is already there (Node.js from elsewhere ships its own).
command -v npm >/dev/null || packages+=(npm)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo_cmd=(); [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
fi
# axe-core, the accessibility engine of "report: browser accessibility ...", pinned.
axe_version=4.14.1
root="$(cd "$(dirname "$0")/.." && pwd)"
axe="$root/third_party/npm/node_modules/axe-core"
if ! grep -qs "\"version\": \"$axe_version\"" "$axe/package.json"; then
  npm install --prefix "$root/third_party/npm" --no-save --no-audit --no-fund "axe-core@$axe_version"
fi
