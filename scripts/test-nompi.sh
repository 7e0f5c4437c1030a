#!/usr/bin/env bash
# Builds headlab without MPI (-DHEADLAB_MPI=OFF, Release, directory build-nompi) and runs the
# test suite there: the single-process build a user gets without Open MPI, which must build,
# refuse to run as one of N ranks under a launcher, and pass everything that does not need
# mpirun (the `dist` tests are not built in it). Extra arguments go to ctest, e.g.
#   bash scripts/test-nompi.sh -R '^train'
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-nompi -G Ninja -DCMAKE_BUILD_TYPE=Release -DHEADLAB_MPI=OFF >/dev/null
grep -q '^MPI_CXX_FOUND:.*=TRUE' build-nompi/CMakeCache.txt &&
  { echo "test-nompi.sh: build-nompi found MPI although HEADLAB_MPI=OFF" >&2; exit 1; }
cmake --build build-nompi
ctest --test-dir build-nompi --output-on-failure -j 2 --timeout 900 "$@"
