#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine, builds headlab and runs the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
ctest --test-dir build --output-on-failure -j 2 --timeout 900
