#!/usr/bin/env bash
# Re-measures every table of the README ("Do heads specialize?") and of docs/analysis.md ("The
# flagship over 20 seeds" with "The flagship in bf16" where the CPU has AVX512_BF16, "The
# flagship's region: a phase diagram", "Induction heads", "Early dropout") and prints them as
# markdown to stdout, block by block: paste them over the old ones. Each block runs its sweeps
# (configs/dependency.toml as it is, unless the block names another config: blocks 2 and 5 the
# recipe before early dropout, configs/dependency-full-dropout.toml) and then prints its tables
# (scripts/flagship_tables.py, which reads only the sweeps' documents).
#
#   bash scripts/flagship-tables.sh [OUT]     # OUT defaults to runs/flagship-tables
#
# Environment: JOBS (runs trained at once, default 2), SEEDS (the head-count sweeps, default 20),
# LAYER_SEEDS (default 10), PHASE_SEEDS (the phase diagram, default 10), FRESH_SEEDS (the
# recipe on seeds 1001.., default 30). It needs build/headlab (scripts/build.sh) and Debian's
# python3; an existing sweep directory of OUT is reused (`--report-only` collection), so delete
# it to measure again. On two quiet cores the first block takes about twelve minutes, the second
# about as long again.
#
# Adding a block: append it at the end, in the same shape (a comment saying which tables of
# which document it re-measures, its `sweep` calls, then `tables NAME...` for tables of
# flagship_tables.py, or a script of its own reading "$out").
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-runs/flagship-tables}
jobs=${JOBS:-2}
seeds=${SEEDS:-20}
layer_seeds=${LAYER_SEEDS:-10}
phase_seeds=${PHASE_SEEDS:-10}
fresh_seeds=${FRESH_SEEDS:-30}
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

sweep_with() {  # sweep_with CONFIG DIR ARGS...: as sweep, with its own config
  local config=$1 dir=$2
  shift 2
  if [[ -f $dir/sweep.json ]]; then
    $headlab sweep "$config" "$@" --out "$dir" --report-only >/dev/null
  else
    $headlab sweep "$config" "$@" --out "$dir" --jobs "$jobs" --no-progress >&2
  fi
}
# The flagship's recipe before early dropout: blocks 2 and 5 were measured on it.
before=configs/dependency-full-dropout.toml

tables() {  # tables NAME...: print these tables of scripts/flagship_tables.py
  /usr/bin/python3 scripts/flagship_tables.py "$out" "$@"
}

# --- Block 1: the head-count tables (README "Do heads specialize?", docs/analysis.md "The
# flagship over 20 seeds") ---
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
tables heads heads-101 order pruning layers cost

# --- Block 2: the phase diagram (docs/analysis.md "The flagship's region: a phase diagram"),
# of the recipe before early dropout ($before) ---
# h = 4 on seeds 1..10 over two pairs of keys, the recipe in the middle of each; the
# single-lever table reads its rows from the same sweeps.
sweep_with $before "$out/phase-width-dropout" --over model.d_model=48,64,96 \
  --over model.attn_dropout=0,0.1,0.15,0.2,0.3 --seeds "$phase_seeds"
sweep_with $before "$out/phase-lr-positions" --over optim.lr=0.0015,0.003,0.006 \
  --over model.pos_init_std=0.7,0.85,1.0 --seeds "$phase_seeds"
# That recipe on seeds nobody tuned on (train.seed = 1001..1030).
sweep_with $before "$out/fresh-1001" --over model.heads=4 --set train.seed=1001 \
  --seeds "$fresh_seeds"
tables phase-width-dropout phase-lr-positions levers fresh

# --- Block 3: induction heads (README and docs/analysis.md "Induction heads") ---
# 1 layer vs 2 (configs/induction.toml: attention-only, causal), seeds 101..110, none tuned on.
induction_dir=$out/induction
if [[ ! -f $induction_dir/sweep.json ]]; then
  $headlab sweep configs/induction.toml --over model.layers=1,2 --seeds 10 --set train.seed=101 \
    --out "$induction_dir" --jobs "$jobs" --no-progress >&2
fi
echo
echo "## Induction heads"
echo
/usr/bin/python3 scripts/induction_tables.py "$induction_dir"

# --- Block 4: composition on untuned seeds, pruning by measure (docs/analysis.md "One layer
# vs two, with BEFORE_HEAD" and "Pruning") ---
# configs/composition.toml on seeds 301..310 (none tuned on); pruning at h = 4 and 8 by mean
# ablation and by patching (the gradient rows come from block 1's head-count sweep).
sweep_with configs/composition.toml "$out/composition" --over model.layers=2 --set train.seed=301 --seeds 10
for measure in mean_ablation patching; do
  sweep_with configs/dependency.toml "$out/prune-$measure" --over model.heads=4,8 \
    --set train.pruning_importance=$measure --seeds 10
done
tables composition pruning-measures

# --- Block 5: which relation loses, and a candidate recipe (docs/analysis.md "Which relation
# loses under each breaking lever, and why" and "A candidate recipe: positions N(0, 1), 500
# warmup steps") ---
# h = 4 on seeds 1..10 (PHASE_SEEDS): the breaking levers of the recipe before early dropout
# ($before) and the probes of the race for heads; about 460 runs in all, some fourteen minutes
# on two quiet cores.
sweep_with $before "$out/race-base" --over model.heads=4 --seeds "$phase_seeds"
sweep_with $before "$out/race-d48" --over model.d_model=48 --seeds "$phase_seeds"
sweep_with $before "$out/race-d48-hd16" --over model.d_model=48 --set model.head_dim=16 --seeds "$phase_seeds"
sweep_with $before "$out/race-lr" --over optim.lr=0.0015 --seeds "$phase_seeds"
sweep_with $before "$out/race-dropout" --over model.attn_dropout=0.3 --seeds "$phase_seeds"
sweep_with $before "$out/race-positions-lr" --over 'optim.lr_scale.positions.*=0.25,0.5,2,4,8' \
  --over model.attn_dropout=0.15,0.3 --seeds "$phase_seeds"
sweep_with $before "$out/race-embeddings-lr" --over 'optim.lr_scale.embeddings.*=0.25,0.5' \
  --over model.attn_dropout=0.15,0.3 --seeds "$phase_seeds"
sweep_with $before "$out/race-positions" --over model.pos_init_std=1.0,1.15 --over model.attn_dropout=0.15,0.3 \
  --seeds "$phase_seeds"
# configs/dependency-region.toml: its levers and neighbours on seeds 1..10, then seeds 1001..1030.
region=configs/dependency-region.toml
sweep_with $region "$out/region-base" --over model.heads=4 --seeds "$phase_seeds"
sweep_with $region "$out/region-d_model" --over model.d_model=48,96 --seeds "$phase_seeds"
sweep_with $region "$out/region-lr" --over optim.lr=0.0015,0.006 --seeds "$phase_seeds"
sweep_with $region "$out/region-dropout" --over model.attn_dropout=0,0.3 --seeds "$phase_seeds"
sweep_with $region "$out/region-d48-dk12" --over model.d_model=48 --set model.head_dim=0 \
  --seeds "$phase_seeds"
sweep_with $region "$out/region-warmup" --over schedule.warmup_steps=100,300 \
  --set model.attn_dropout=0.3 --seeds "$phase_seeds"
sweep_with $region "$out/region-positions" --over model.pos_init_std=0.85,0.925 \
  --over model.attn_dropout=0.15,0.3 --seeds "$phase_seeds"
sweep_with $region "$out/region-h1-dk64" --over model.heads=1 --set model.head_dim=0 \
  --seeds "$phase_seeds"
sweep_with $region "$out/region-heads" --over model.heads=1,2 --seeds "$phase_seeds"
sweep_with $region "$out/region-fresh" --over model.heads=4 --set train.seed=1001 \
  --seeds "$fresh_seeds"
tables race region region-fresh

# --- Block 6: the flagship in bf16 (docs/analysis.md "The flagship in bf16"), where the CPU has
# AVX512_BF16: h = 4 on the head-count sweep's seeds with runtime.precision = "bf16".
if grep -qw avx512_bf16 /proc/cpuinfo; then
  sweep "$out/heads-bf16" --over model.heads=4 --set runtime.precision=bf16 --seeds "$seeds"
  tables heads-bf16
fi

# --- Block 7: early dropout (docs/analysis.md "Early dropout: the recipe that meets the tail") ---
# Each variant (the names are flagship_tables.py's EARLY) at h = 4 on two blocks of dev seeds
# (41..70, 11..40) and at h = 1 and 2 on seeds 1..10; then the recipe's levers on seeds 1..10
# and the recipe and the one before it on a third dev block and on fresh seeds. About 1,000 runs,
# some thirty minutes on two quiet cores.
early() {  # early NAME CONFIG ARGS...
  local name=$1 config=$2
  shift 2
  for b in 41 11; do
    sweep_with "$config" "$out/early-$name-$b" --over model.heads=4 --set train.seed=$b --seeds 30 "$@"
  done
  sweep_with "$config" "$out/early-$name-h12" --over model.heads=1,2 --seeds "$phase_seeds" "$@"
}
early full $before
early full-600 $before --set model.dropout_steps=600
early recipe configs/dependency.toml
early steps-500 configs/dependency.toml --set model.dropout_steps=500
early steps-700 configs/dependency.toml --set model.dropout_steps=700
early lr-0.0045 configs/dependency.toml --set optim.lr=0.0045
early dropout-0.2 configs/dependency.toml --set model.attn_dropout=0.2
early warmup-300 configs/dependency.toml --set schedule.warmup_steps=300
early warmup-500 configs/dependency.toml --set schedule.warmup_steps=500
sweep "$out/early-levers-base" --over model.heads=4 --seeds "$phase_seeds"
sweep "$out/early-levers-d_model" --over model.d_model=48,96 --seeds "$phase_seeds"
sweep "$out/early-levers-lr" --over optim.lr=0.003,0.012 --seeds "$phase_seeds"
sweep "$out/early-levers-dropout" --over model.attn_dropout=0,0.3 --seeds "$phase_seeds"
# The recipe's region: two grids of its keys, its cell in the middle of each.
sweep "$out/early-phase-width-dropout" --over model.d_model=48,64,96 \
  --over model.attn_dropout=0,0.1,0.15,0.2,0.3 --seeds "$phase_seeds"
sweep "$out/early-phase-lr-steps" --over optim.lr=0.003,0.006,0.012 \
  --over model.dropout_steps=400,600,800 --seeds "$phase_seeds"
for b in 71 1001 3001 4001; do
  sweep "$out/early-fresh-recipe-$b" --over model.heads=4 --set train.seed=$b --seeds 30
  sweep_with $before "$out/early-fresh-full-$b" --over model.heads=4 --set train.seed=$b --seeds 30
done
# Dropout until step 400, the lr x dropout-steps grid's best tail: its other levers and its
# contrast (its lr levers are cells of that grid), and two more fresh blocks beside the recipe.
sweep "$out/early-s400-d_model" --set model.dropout_steps=400 --over model.d_model=48,96 \
  --seeds "$phase_seeds"
sweep "$out/early-s400-dropout" --set model.dropout_steps=400 --over model.attn_dropout=0,0.3 \
  --seeds "$phase_seeds"
sweep "$out/early-s400-heads" --set model.dropout_steps=400 --over model.heads=1,2 \
  --seeds "$phase_seeds"
for b in 5001 6001; do
  sweep "$out/early-fresh-recipe-$b" --over model.heads=4 --set train.seed=$b --seeds 30
  sweep "$out/early-fresh-s400-$b" --over model.heads=4 --set train.seed=$b --seeds 30 \
    --set model.dropout_steps=400
done
tables early early-levers early-fresh early-phase-width-dropout early-phase-lr-steps early-s400
