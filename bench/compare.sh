#!/usr/bin/env bash
# headlab vs PyTorch on the training step, side by side in one run (see bench/compare.py for the
# method). Run time: ROUNDS x (presets) x (thread counts) pairs; with the defaults (3 rounds;
# S, M, L; 1 and 2 threads) about 5 minutes on a 2-core machine. Examples:
#   bench/compare.sh                                   # everything, build/headlab
#   bench/compare.sh --presets S,M --threads 1 --rounds 5
#   HEADLAB=build-perf/headlab bench/compare.sh --steps S=200,M=60,L=10 --json runs.json
# PyTorch comes from /usr/bin/python3 (Debian's torch; override with TORCH_PYTHON=).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
exec "${TORCH_PYTHON:-/usr/bin/python3}" "$here/compare.py" "$@"
