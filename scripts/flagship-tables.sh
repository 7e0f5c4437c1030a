#!/usr/bin/env bash
# Re-measures every table of docs/analysis.md ("The flagship over 20 seeds") and the README's
# "Do heads specialize?" section: the head-count sweep (h = 1, 2, 3, 4, 8 over 20 seeds,
# train.seed = 1..20, configs/dependency.toml as it is), h = 1, 2, 4 on seeds 101..120, the
# 1-vs-2-layer composition sweep (10 seeds) and the cost of the timeline, then prints the
# markdown tables (scripts/flagship_tables.py) to stdout: paste them over the old ones.
#
#   bash scripts/flagship-tables.sh [OUT]     # OUT defaults to runs/flagship-tables
#
# Environment: JOBS (runs trained at once, default 2), SEEDS (default 20), LAYER_SEEDS
# (default 10). It needs build/headlab (scripts/build.sh) and Debian's python3; an existing OUT
# is reused run by run (`--report-only` collection), so delete it to measure again. About
# twelve minutes on two cores.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-runs/flagship-tables}
jobs=${JOBS:-2}
seeds=${SEEDS:-20}
layer_seeds=${LAYER_SEEDS:-10}
headlab=build/headlab
[[ -x $headlab ]] || { echo "flagship-tables: $headlab not found; run scripts/build.sh" >&2; exit 2; }
mkdir -p "$out"

sweep() {  # sweep DIR ARGS...: train it unless it is complete, else only re-collect it
  local dir=$1
  shift
  if [[ -f $dir/sweep.json ]]; then
    $headlab sweep configs/dependency.toml "$@" --out "$dir" --report-only >/dev/null
  else
    $headlab sweep configs/dependency.toml "$@" --out "$dir" --jobs "$jobs" --no-progress >&2
  fi
}

# The head-count sweep: d_model 64 in every run, d_k = 64 / h (h = 3: head_dim 21).
sweep "$out/heads" --over model.heads=1,2,4,8 --seeds "$seeds"
sweep "$out/heads-3" --over model.heads=3 --set model.head_dim=21 --seeds "$seeds"
# The same contrast on a second seed range (train.seed = 101..120): the recipe's margin.
sweep "$out/heads-101" --over model.heads=1,2,4 --set train.seed=101 --seeds "$seeds"
# Composition: BEFORE_HEAD (the word just before my syntactic head) needs two layers.
sweep "$out/layers" --over model.layers=1,2 \
  --set 'task.relations=["PREV","HEAD","SEM","BEFORE_HEAD"]' --seeds "$layer_seeds"
# The timeline's cost: the flagship (seed 1) three times with and three times without it.
for k in 1 2 3; do
  for on in true false; do
    dir=$out/cost/timeline-$on-$k
    [[ -f $dir/summary.json ]] && continue
    rm -rf "$dir"
    $headlab train configs/dependency.toml --no-analysis --set train.timeline=$on --out "$dir" \
      >/dev/null 2>&1
  done
done

/usr/bin/python3 scripts/flagship_tables.py "$out"

# --- sci-circuits (issue 25 items 3 and 5): composition on untuned seeds, pruning by measure ---
sweep_with() {  # sweep_with CONFIG DIR ARGS...: as sweep, with its own config
  local config=$1 dir=$2
  shift 2
  if [[ -f $dir/sweep.json ]]; then
    $headlab sweep "$config" "$@" --out "$dir" --report-only >/dev/null
  else
    $headlab sweep "$config" "$@" --out "$dir" --jobs "$jobs" --no-progress >&2
  fi
}
sweep_with configs/composition.toml "$out/composition" --over model.layers=2 --set train.seed=301 --seeds 10
for measure in mean_ablation patching; do
  sweep_with configs/dependency.toml "$out/prune-$measure" --over model.heads=4,8 \
    --set train.pruning_importance=$measure --seeds 10
done
