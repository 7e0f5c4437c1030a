#!/usr/bin/env bash
# headlab vs PyTorch at its best on the training step, side by side in one run (see
# bench/compare.py for the method: PyTorch with the OpenBLAS core the environment gives it and,
# when that core is narrower than the CPU's vectors, with the best one too; where the CPU has
# AVX512_BF16, the bf16 table too: headlab bf16 and PyTorch under CPU autocast in the same
# rotation). Run time: ROUNDS x (presets) x (thread counts) rounds of 2-6 programs; with the
# defaults (3 rounds; S, M, L; 1 and 2 threads; fp32 and bf16) about 15 minutes on a quiet
# 2-core machine. Examples:
#   bench/compare.sh                                   # everything, build/headlab: the README table
#   bench/compare.sh --presets S,M --threads 1 --rounds 5
#   bench/compare.sh --precisions fp32                 # the fp32 table alone
#   bench/compare.sh --baseline build-base/headlab     # an earlier build in the same rotation
#   HEADLAB=build-perf/headlab bench/compare.sh --steps S=200,M=60,L=10 --json runs.json
# PyTorch comes from /usr/bin/python3 (Debian's torch; override with TORCH_PYTHON=).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
exec "${TORCH_PYTHON:-/usr/bin/python3}" "$here/compare.py" "$@"
