#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine, builds headlab, trains the flagship config and writes its
# report (runs/dependency/report.html). Extra arguments go to `headlab train`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
out=runs/dependency
if [[ -e "$out" ]]; then out="runs/dependency-$(date +%Y%m%d-%H%M%S)"; fi
./build/headlab train configs/dependency.toml --out "$out" "$@"
echo "report: $out/report.html"
