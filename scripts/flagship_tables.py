#!/usr/bin/env python3
"""Markdown tables of docs/analysis.md and the README from the sweeps of flagship-tables.sh.

usage: flagship_tables.py OUT [NAME...]   (OUT: the directory scripts/flagship-tables.sh wrote;
       NAME: the tables to print, all of them without; see tables() below)

Reads only headlab's documents: sweep.json, each run's heads.json and timeline.jsonl, and
summary.json of the timeline-cost runs. A run is "specialized" when its eval accuracy is at least
0.95, all three relations are claimed (n_claimed = 3) and s_match >= 0.8.
"""
import collections
import json
import os
import statistics
import sys


def load(path):
    with open(path) as f:
        return json.load(f)


def runs_of(sweep_dir):
    sweep = load(os.path.join(sweep_dir, "sweep.json"))
    for run in sweep["runs"]:
        run["path"] = os.path.join(sweep_dir, run["dir"])
    return [r for r in sweep["runs"] if r.get("ok")]


def mean_sd(values, digits=3):
    if not values:
        return "-"
    m = statistics.mean(values)
    sd = statistics.pstdev(values) if len(values) > 1 else 0.0
    return f"{m:.{digits}f} ± {sd:.{digits}f}"


def spread(values):
    if not values:
        return "never"
    lo, hi = min(values), max(values)
    return f"{lo}" if lo == hi else f"{lo}-{hi}"


def specialized(run):
    return run["eval_accuracy"] >= 0.95 and run["n_claimed"] == 3 and run["s_match"] >= 0.8


def heads_table(runs):
    groups = collections.defaultdict(list)
    for r in runs:
        groups[r["values"]["model.heads"]].append(r)
    print("| heads | d_k | eval accuracy | lowest | reached 95% | steps to 95% | s_match | "
          "lowest s_match | n_claimed | specialized | train s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for h in sorted(groups):
        rs = groups[h]
        acc = [r["eval_accuracy"] for r in rs]
        sm = [r["s_match"] for r in rs]
        reached = [r["steps_to_95"] for r in rs if r.get("steps_to_95") is not None]
        claimed = collections.Counter(r["n_claimed"] for r in rs)
        claims = ", ".join(f"{k}: {claimed[k]}" for k in sorted(claimed))
        print(f"| {h} | {rs[0].get('d_k', 64 // h)} | {mean_sd(acc)} | {min(acc):.3f} | "
              f"{len(reached)} of {len(rs)} | {spread(reached)} | {mean_sd(sm, 2)} | "
              f"{min(sm):.2f} | {claims} | {sum(map(specialized, rs))} of {len(rs)} | "
              f"{statistics.mean(r['train_seconds'] for r in rs):.2f} |")


def first_claims(run, relations):
    """Step at which each relation's assigned head first has mass > 0.5 (None: never)."""
    steps = {r: None for r in relations}
    with open(os.path.join(run["path"], "timeline.jsonl")) as f:
        for line in f:
            try:
                row = json.loads(line)
            except ValueError:
                continue
            for rel in relations:
                ref = row["assignment"].get(rel)
                if steps[rel] is None and ref and row["mass"][ref[0]][ref[1]][rel] > 0.5:
                    steps[rel] = row["step"]
    return steps


def order_table(runs, heads):
    rs = [r for r in runs if r["values"]["model.heads"] == heads]
    relations = load(os.path.join(rs[0]["path"], "heads.json"))["relations"]
    claims = [first_claims(r, relations) for r in rs]
    print(f"| relation (h = {heads}) | first claimed at step (median) | range | "
          f"claimed first (ties included) |")
    print("|---|---|---|---|")
    for rel in relations:
        steps = [c[rel] for c in claims if c[rel] is not None]
        first = sum(1 for c in claims if c[rel] is not None and
                    c[rel] == min(v for v in c.values() if v is not None))
        med = statistics.median(steps) if steps else "never"
        print(f"| {rel} | {med} | {spread(steps)} | {first} of {len(rs)} |")
    orders = collections.Counter()
    for c in claims:
        steps = sorted(set(v for v in c.values() if v is not None))
        orders[" → ".join(" = ".join(r for r in relations if c[r] == s) for s in steps)] += 1
    print()
    print("| order of the first claims | seeds |")
    print("|---|---|")
    for order, n in orders.most_common():
        print(f"| {order} | {n} |")


def claimed_heads(doc):
    """Heads assigned to a relation with mass > 0.5: {(layer, head): relation}."""
    out = {}
    for rel, ref in doc["specialization"]["assignment"].items():
        if ref and doc["layers"][ref[0]]["heads"][ref[1]]["mass"][rel] > 0.5:
            out[tuple(ref)] = rel
    return out


def pruning_row(rs):
    """Over the runs rs: how many prune every specialized head (claimed_heads) after all the
    others, the accuracy when only those are left (the runs where they are last), and with one
    head left."""
    last, only, one = 0, [], []
    for r in rs:
        doc = load(os.path.join(r["path"], "heads.json"))
        curve, special = doc["pruning"], claimed_heads(doc)
        removed = [tuple(p["pruned"]) for p in curve if p["pruned"] is not None]
        n = len(removed) + 1
        ok = all(k not in special for k in removed[: n - len(special)])
        last += ok
        if ok and len(special) < n:
            only.append(curve[n - len(special)]["accuracy"])
        one.append(curve[-1]["accuracy"])
    return f"{last} of {len(rs)} | {mean_sd(only)} | {mean_sd(one)}"


def with_heads(runs, h):
    return [r for r in runs if r["values"]["model.heads"] == h]


def pruning_table(runs):
    print("| heads | specialized heads last to go | accuracy, only they left | "
          "accuracy, one head left |")
    print("|---|---|---|---|")
    for h in (4, 8):
        print(f"| {h} | {pruning_row(with_heads(runs, h))} |")


def pruning_measures_table(gradient_runs, by_measure):
    """The pruning table per importance measure: gradient from the head-count sweep (its seed
    count named), the others from their own sweeps ({measure: runs})."""
    print("| heads | measure | specialized heads last to go | accuracy, only they left | "
          "accuracy, one head left |")
    print("|---|---|---|---|---|")
    for h in (4, 8):
        rs = with_heads(gradient_runs, h)
        print(f"| {h} | gradient ({len(rs)} seeds) | {pruning_row(rs)} |")
        for measure, runs in by_measure.items():
            print(f"| {h} | {measure} | {pruning_row(with_heads(runs, h))} |")


def strongest(head):
    rel = max(head["mass"], key=head["mass"].get)
    return rel, head["mass"][rel]


def layers_table(runs):
    relations = load(os.path.join(runs[0]["path"], "heads.json"))["relations"]
    print("| layers | eval accuracy | " + " | ".join(relations) + " | reached 95% |")
    print("|---|---|" + "---|" * len(relations) + "---|")
    for layers in (1, 2):
        rs = [r for r in runs if r["values"]["model.layers"] == layers]
        docs = [load(os.path.join(r["path"], "heads.json")) for r in rs]
        comp = [mean_sd([d["eval_component_accuracy"][rel] for d in docs]) for rel in relations]
        reached = sum(1 for r in rs if r.get("steps_to_95") is not None)
        print(f"| {layers} | {mean_sd([r['eval_accuracy'] for r in rs])} | " +
              " | ".join(comp) + f" | {reached} of {len(rs)} |")
    print()
    print("| seed | strongest BEFORE_HEAD path: layer-1 head (its relation) | composes with "
          "(its relation) | path mass | the layer-1 head's own BEFORE_HEAD mass |")
    print("|---|---|---|---|---|")
    for r in [r for r in runs if r["values"]["model.layers"] == 2]:
        doc = load(os.path.join(r["path"], "heads.json"))
        paths = [c for c in doc["composition"] if c["relation"] == "BEFORE_HEAD"]
        if not paths:
            print(f"| {r['seed']} | none | - | - | - |")
            continue
        c = max(paths, key=lambda c: c["path_mass"])
        y = doc["layers"][c["layer"]]["heads"][c["head"]]
        x = doc["layers"][c["composes_with"][0]]["heads"][c["composes_with"][1]]
        (yr, ym), (xr, xm) = strongest(y), strongest(x)
        print(f"| {r['seed']} | L{c['layer']} H{c['head']} ({yr} {ym:.2f}) | "
              f"L{c['composes_with'][0]} H{c['composes_with'][1]} ({xr} {xm:.2f}) | "
              f"{c['path_mass']:.2f} | {c['mass']:.2f} |")


def composition_table(runs):
    """Per seed of a two-layer BEFORE_HEAD sweep: the strongest BEFORE_HEAD path (heads.json
    "composition", as layers_table), its upper head's HEAD mass and its lower head's PREV mass,
    the uniform-Y chance (path_mass_baseline), whether the path is claimed, and how many
    layer-1 heads have a claimed BEFORE_HEAD path. A seed composes when its strongest path is
    claimed and BEFORE_HEAD's component accuracy is at least 0.95."""
    print("| seed | eval accuracy | BEFORE_HEAD accuracy | strongest BEFORE_HEAD path: layer-1 "
          "head (HEAD mass) | composes with (PREV mass) | path mass | chance, Y uniform | "
          "claimed | layer-1 heads claimed on BEFORE_HEAD |")
    print("|---|---|---|---|---|---|---|---|---|")
    composes = 0
    for r in sorted(runs, key=lambda r: r["seed"]):
        doc = load(os.path.join(r["path"], "heads.json"))
        acc = doc["eval_component_accuracy"]["BEFORE_HEAD"]
        upper = [c for c in doc["composition"] if c["layer"] == 1]
        paths = [c for c in upper if c["relation"] == "BEFORE_HEAD"]
        n_claimed = sum(1 for c in paths if c["claimed"])
        head = f"{r['eval_accuracy']:.3f} | {acc:.3f}"
        if not paths:
            print(f"| {r['seed']} | {head} | none | - | - | - | - | 0 of {len(upper)} |")
            continue
        c = max(paths, key=lambda c: c["path_mass"])
        y = doc["layers"][c["layer"]]["heads"][c["head"]]["mass"]["HEAD"]
        xl, xh = c["composes_with"]
        x = doc["layers"][xl]["heads"][xh]["mass"]["PREV"]
        composes += c["claimed"] and acc >= 0.95
        print(f"| {r['seed']} | {head} | L{c['layer']} H{c['head']} ({y:.2f}) | L{xl} H{xh} "
              f"({x:.2f}) | {c['path_mass']:.2f} | {c['path_mass_baseline']:.3f} | "
              f"{'yes' if c['claimed'] else 'no'} | {n_claimed} of {len(upper)} |")
    print(f"\nComposes (the strongest BEFORE_HEAD path claimed, BEFORE_HEAD accuracy >= 0.95): "
          f"{composes} of {len(runs)}.")


def cost_table(out):
    rows = collections.defaultdict(list)
    cost = os.path.join(out, "cost")
    for name in sorted(os.listdir(cost)):
        s = load(os.path.join(cost, name, "summary.json"))
        rows[name.split("-")[1]].append((s["train_seconds"], s["eval_seconds"]))
    print("| timeline | train s (median of 3) | evaluation s (median of 3) | evaluation / train |")
    print("|---|---|---|---|")
    med = {}
    for on in ("false", "true"):
        t = statistics.median(v[0] for v in rows[on])
        e = statistics.median(v[1] for v in rows[on])
        med[on] = (t, e)
        print(f"| {on} | {t:.2f} | {e:.2f} | {e / t:.0%} |")
    extra = med["true"][1] - med["false"][1]
    print(f"\nThe timeline adds {extra:.2f} s of evaluation to {med['true'][0]:.2f} s of "
          f"training: {extra / med['true'][0]:.1%}.")


def all_runs(sweep_dir):
    """Every run of sweep.json, failed ones included (they count as not specialized)."""
    sweep = load(os.path.join(sweep_dir, "sweep.json"))
    for run in sweep["runs"]:
        run["path"] = os.path.join(sweep_dir, run["dir"])
    return sweep["over"], sweep["runs"]


def recipe(config="dependency-full-dropout.toml"):
    """The values of the keys a phase diagram sweeps, in the recipe it was measured around: by
    default configs/dependency-full-dropout.toml (the flagship's recipe before early dropout,
    blocks 2 and 5), or configs/dependency.toml (block 7)."""
    import tomllib
    with open(os.path.join(os.path.dirname(__file__), "..", "configs", config), "rb") as f:
        config = tomllib.load(f)
    return {f"{table}.{key}": value for table, keys in config.items() if isinstance(keys, dict)
            for key, value in keys.items()}


def lost(run):
    """Why a run is not specialized, from its heads.json: each relation whose assigned head
    does not claim it ("PREV unclaimed (L0H2 0.31)"), else the weakest claimed relation."""
    if not run.get("ok"):
        return "failed"
    doc = load(os.path.join(run["path"], "heads.json"))
    spec = doc["specialization"]
    threshold = spec.get("claim_threshold", 0.5)
    masses = {}
    for rel in doc["relations"]:
        ref = spec["assignment"].get(rel)
        masses[rel] = (doc["layers"][ref[0]]["heads"][ref[1]]["mass"][rel], ref) if ref else \
            (0.0, None)
    unclaimed = [r for r, (m, _) in masses.items() if m <= threshold]
    if unclaimed:
        return ", ".join(f"{r} unclaimed" + (f" (L{masses[r][1][0]}H{masses[r][1][1]} "
                                             f"{masses[r][0]:.2f})" if masses[r][1] else "")
                         for r in unclaimed)
    weakest = min(masses, key=lambda r: masses[r][0])
    return f"weakest {weakest} {masses[weakest][0]:.2f}"


def failure_list(runs):
    out = []
    for r in runs:
        if r.get("ok") and specialized(r):
            continue
        acc = f"{r['eval_accuracy']:.2f}/{r['s_match']:.2f}/{r['n_claimed']}" if r.get("ok") \
            else "-"
        out.append(f"{r['seed']}: {acc} {lost(r)}")
    return "; ".join(out)


def same(a, b):
    return abs(float(a) - float(b)) < 1e-9 if isinstance(a, (int, float)) else a == b


def cell_of(runs, key_a, a, key_b, b):
    return [r for r in runs if same(r["values"][key_a], a) and same(r["values"][key_b], b)]


def grid_table(sweep_dir, config="dependency-full-dropout.toml"):
    """The phase diagram of a two-key sweep: rows the first key, columns the second; each cell
    "specialized k/N, mean eval accuracy, lowest s_match"; the cell of the recipe in configs/
    `config` in bold."""
    (key_a, key_b), runs = all_runs(sweep_dir)
    rows = list(dict.fromkeys(r["values"][key_a] for r in runs))
    cols = list(dict.fromkeys(r["values"][key_b] for r in runs))
    base = recipe(config)
    print(f"{key_a} \\ {key_b}: specialized of N seeds · mean eval accuracy · lowest s_match "
          f"(bold: the recipe)\n")
    print(f"| {key_a} | " + " | ".join(f"{key_b} {c}" for c in cols) + " |")
    print("|---|" + "---|" * len(cols))
    for a in rows:
        cells = []
        for b in cols:
            rs = cell_of(runs, key_a, a, key_b, b)
            ok = [r for r in rs if r.get("ok")]
            text = (f"{sum(1 for r in ok if specialized(r))}/{len(rs)} · "
                    f"{statistics.mean(r['eval_accuracy'] for r in ok):.3f} · "
                    f"{min(r['s_match'] for r in ok):.2f}") if ok else f"0/{len(rs)} · - · -"
            bold = same(base.get(key_a), a) and same(base.get(key_b), b)
            cells.append(f"**{text}**" if bold else text)
        print(f"| {a} | " + " | ".join(cells) + " |")
    print()
    print("| setting | not specialized (seed: accuracy / s_match / claimed, what lost) |")
    print("|---|---|")
    for a in rows:
        for b in cols:
            fails = failure_list(cell_of(runs, key_a, a, key_b, b))
            if fails:
                print(f"| {key_a} {a}, {key_b} {b} | {fails} |")


def levers_table(out):
    """Each single-lever change of the goal, read from the phase diagram's sweeps: the recipe
    with one key changed, the others at the recipe's values."""
    base = recipe()
    levers = [("phase-width-dropout", "model.d_model", [48, 96]),
              ("phase-width-dropout", "model.attn_dropout", [0.0, 0.3]),
              ("phase-lr-positions", "optim.lr", [base["optim.lr"] * 0.5, base["optim.lr"] * 2]),
              ("phase-lr-positions", "model.pos_init_std", [])]
    print("| lever | value | specialized | eval accuracy (lowest) | s_match (mean, lowest) | "
          "not specialized (seed: accuracy / s_match / claimed, what lost) |")
    print("|---|---|---|---|---|---|")
    for name, key, values in levers:
        over, runs = all_runs(os.path.join(out, name))
        other = [k for k in over if k != key][0]
        values = values or [v for v in dict.fromkeys(r["values"][key] for r in runs)
                            if not same(v, base[key])]
        for v in [base[key]] + values:
            rs = cell_of(runs, key, v, other, base[other])
            ok = [r for r in rs if r.get("ok")]
            if not rs:
                continue
            sm = [r["s_match"] for r in ok]
            print(f"| {key} | {v:g}{' (recipe)' if same(v, base[key]) else ''} | "
                  f"{sum(1 for r in ok if specialized(r))} of {len(rs)} | "
                  f"{min(r['eval_accuracy'] for r in ok):.3f} | "
                  f"{statistics.mean(sm):.2f}, {min(sm):.2f} | {failure_list(rs)} |")


def settings_of(out, rows):
    """rows: [(label, sweep name, {key: value})]; each with its runs (every run of the sweep
    whose values match, failed ones included)."""
    for label, name, values in rows:
        _, runs = all_runs(os.path.join(out, name))
        yield label, [r for r in runs if all(same(r["values"][k], v) for k, v in values.items())]


def roles(run):
    """Counter of the heads' roles at the end: each head's relation of largest mass."""
    doc = load(os.path.join(run["path"], "heads.json"))
    return collections.Counter(max(h["mass"], key=h["mass"].get)
                               for layer in doc["layers"] for h in layer["heads"])


def race_table(out, rows):
    """Which relation loses, and how the race for heads went: per setting, the specialized
    count, what lost in each failure (lost()), the roles of the failing runs' heads at the end
    and the median first-claim step of each relation (sweep.json first_claims)."""
    print("| setting | specialized | not specialized (seed: what lost) | roles of the failing "
          "runs' heads at the end (HEAD / SEM / PREV) | first claim, median step (HEAD, SEM, "
          "PREV; never) |")
    print("|---|---|---|---|---|")
    for label, rs in settings_of(out, rows):
        ok = [r for r in rs if r.get("ok")]
        failing = [r for r in rs if not (r.get("ok") and specialized(r))]
        who = collections.Counter()
        for r in failing:
            if r.get("ok"):
                who += roles(r)
        claims, never = [], []
        for rel in ("HEAD", "SEM", "PREV"):
            steps = [r["first_claims"][rel] for r in ok
                     if (r.get("first_claims") or {}).get(rel) is not None]
            claims.append(f"{statistics.median(steps):g}" if steps else "never")
            if len(steps) < len(ok):
                never.append(f"{rel} never on {len(ok) - len(steps)}")
        fails = "; ".join(f"{r['seed']}: {lost(r)}" for r in failing) or "-"
        split = " / ".join(str(who[rel]) for rel in ("HEAD", "SEM", "PREV")) if failing else "-"
        print(f"| {label} | {sum(1 for r in ok if specialized(r))} of {len(rs)} | {fails} | "
              f"{split} | {', '.join(claims)}{'; ' + ', '.join(never) if never else ''} |")


def setting_summary(rs):
    """The finished runs of one setting, their eval accuracies and s_match, and how many
    specialized."""
    ok = [r for r in rs if r.get("ok")]
    return (ok, [r["eval_accuracy"] for r in ok], [r["s_match"] for r in ok],
            sum(1 for r in ok if specialized(r)))


def settings_table(out, rows):
    """Per setting: specialized, eval accuracy (lowest), s_match (mean, lowest), failures."""
    print("| setting | specialized | eval accuracy (lowest) | s_match (mean, lowest) | "
          "not specialized (seed: accuracy / s_match / claimed, what lost) |")
    print("|---|---|---|---|---|")
    for label, rs in settings_of(out, rows):
        _, acc, sm, spec = setting_summary(rs)
        print(f"| {label} | {spec} of {len(rs)} | "
              f"{min(acc):.3f} (mean {statistics.mean(acc):.3f}) | "
              f"{statistics.mean(sm):.2f}, {min(sm):.2f} | {failure_list(rs) or '-'} |")


# The sweeps of block 5 of flagship-tables.sh: the flagship's breaking levers and the probes of
# the race (configs/dependency.toml), then configs/dependency-region.toml's levers.
RACE = [("the recipe", "race-base", {}),
        ("d_model 48 (d_k 12)", "race-d48", {}),
        ("d_model 48, head_dim 16", "race-d48-hd16", {}),
        ("lr x0.5", "race-lr", {}),
        ("attention dropout 0.3", "race-dropout", {})] + [
    (f"positions' lr x{k:g}, attention dropout {p:g}", "race-positions-lr",
     {"optim.lr_scale.positions.*": k, "model.attn_dropout": p})
    for p in (0.15, 0.3) for k in (0.25, 0.5, 2, 4, 8)] + [
    (f"content embeddings' lr x{k:g}, attention dropout {p:g}", "race-embeddings-lr",
     {"optim.lr_scale.embeddings.*": k, "model.attn_dropout": p})
    for p in (0.15, 0.3) for k in (0.25, 0.5)] + [
    (f"positions N(0, {s:g}^2), attention dropout {p:g}", "race-positions",
     {"model.pos_init_std": s, "model.attn_dropout": p})
    for s in (1.0, 1.15) for p in (0.15, 0.3)]
REGION = [("the candidate", "region-base", {}),
          ("d_model 48", "region-d_model", {"model.d_model": 48}),
          ("d_model 96", "region-d_model", {"model.d_model": 96}),
          ("lr x0.5", "region-lr", {"optim.lr": 0.0015}),
          ("lr x2", "region-lr", {"optim.lr": 0.006}),
          ("attention dropout 0", "region-dropout", {"model.attn_dropout": 0}),
          ("attention dropout 0.3", "region-dropout", {"model.attn_dropout": 0.3}),
          ("d_model 48, head_dim 0 (d_k 12)", "region-d48-dk12", {}),
          ("attention dropout 0.3, 100 warmup steps", "region-warmup",
           {"schedule.warmup_steps": 100}),
          ("attention dropout 0.3, 300 warmup steps", "region-warmup",
           {"schedule.warmup_steps": 300})] + [
    (f"positions N(0, {s:g}^2), attention dropout {p:g}", "region-positions",
     {"model.pos_init_std": s, "model.attn_dropout": p})
    for s in (0.85, 0.925) for p in (0.15, 0.3)] + [
    ("h = 1, head_dim 0 (d_k 64)", "region-h1-dk64", {}),
    ("h = 1", "region-heads", {"model.heads": 1}),
    ("h = 2", "region-heads", {"model.heads": 2})]


def claim_order_of(run):
    """sweep.json's claim_order, else from the run's timeline (a sweep.json of before it)."""
    if run.get("claim_order"):
        return run["claim_order"]
    doc = load(os.path.join(run["path"], "heads.json"))
    steps = first_claims(run, doc["relations"])
    claimed = sorted(set(v for v in steps.values() if v is not None))
    text = " → ".join(" = ".join(r for r in doc["relations"] if steps[r] == s) for s in claimed)
    never = [r for r in doc["relations"] if steps[r] is None]
    return text + (("; " if text else "") + ", ".join(never) + " never" if never else "")


def fresh_table(sweep_dir):
    _, runs = all_runs(sweep_dir)
    ok = [r for r in runs if r.get("ok")]
    seeds = sorted(r["seed"] for r in runs)
    sm = [r["s_match"] for r in ok]
    print("| seeds | specialized | eval accuracy (lowest) | s_match | lowest s_match | "
          "not specialized |")
    print("|---|---|---|---|---|---|")
    print(f"| {seeds[0]}-{seeds[-1]} | {sum(1 for r in ok if specialized(r))} of {len(runs)} | "
          f"{min(r['eval_accuracy'] for r in ok):.3f} | {mean_sd(sm, 2)} | {min(sm):.2f} | "
          f"{failure_list(runs) or '-'} |")
    print()
    orders = collections.Counter(claim_order_of(r) for r in ok)
    print("| order of the first claims | seeds |")
    print("|---|---|")
    for order, n in orders.most_common():
        print(f"| {order} | {n} |")


# The sweeps of block 7 of flagship-tables.sh, early dropout (model.dropout_steps): each
# variant's h = 4 sweeps on two blocks of dev seeds (early-NAME-41, early-NAME-11) and its h = 1
# and 2 on seeds 1..10 (early-NAME-h12). The recipe's own levers, third dev block and fresh
# seeds follow in EARLY_LEVERS and early-fresh.
EARLY = [("attention dropout in every step, lr 3e-3 (the recipe before)", "full"),
         ("the same, model.dropout_steps = 600", "full-600"),
         ("lr 6e-3, model.dropout_steps = 600 (configs/dependency.toml)", "recipe"),
         ("the recipe, dropout_steps 500", "steps-500"),
         ("the recipe, dropout_steps 700", "steps-700"),
         ("the recipe, lr 4.5e-3", "lr-0.0045"),
         ("the recipe, attention dropout 0.2", "dropout-0.2"),
         ("the recipe, 300 warmup steps", "warmup-300"),
         ("the recipe, 500 warmup steps", "warmup-500")]
EARLY_LEVERS = [("the recipe", "early-levers-base", {}),
                ("d_model 48 (d_k 12)", "early-levers-d_model", {"model.d_model": 48}),
                ("d_model 96 (d_k 24)", "early-levers-d_model", {"model.d_model": 96}),
                ("lr x0.5", "early-levers-lr", {"optim.lr": 0.003}),
                ("lr x2", "early-levers-lr", {"optim.lr": 0.012}),
                ("attention dropout 0", "early-levers-dropout", {"model.attn_dropout": 0}),
                ("attention dropout 0.3", "early-levers-dropout", {"model.attn_dropout": 0.3})]


# Dropout until step 400 (block 7): its levers (lr's are cells of the lr x dropout-steps grid)
# and its contrast at h = 1 and 2, seeds 1..10.
EARLY_S400 = [("dropout_steps 400", "early-phase-lr-steps",
               {"optim.lr": 0.006, "model.dropout_steps": 400}),
              ("d_model 48 (d_k 12)", "early-s400-d_model", {"model.d_model": 48}),
              ("d_model 96 (d_k 24)", "early-s400-d_model", {"model.d_model": 96}),
              ("lr x0.5", "early-phase-lr-steps", {"optim.lr": 0.003, "model.dropout_steps": 400}),
              ("lr x2", "early-phase-lr-steps", {"optim.lr": 0.012, "model.dropout_steps": 400}),
              ("attention dropout 0", "early-s400-dropout", {"model.attn_dropout": 0}),
              ("attention dropout 0.3", "early-s400-dropout", {"model.attn_dropout": 0.3}),
              ("h = 1 (d_k 64)", "early-s400-heads", {"model.heads": 1}),
              ("h = 2 (d_k 32)", "early-s400-heads", {"model.heads": 2})]


def contrast_table(out, rows):
    """Per setting: specialized, eval accuracy (mean, lowest-highest), reached 95%, s_match
    (mean, lowest): the levers and the head counts in one table."""
    print("| setting | specialized | eval accuracy (mean, lowest-highest) | reached 95% | "
          "s_match (mean, lowest) |")
    print("|---|---|---|---|---|")
    for label, rs in settings_of(out, rows):
        ok, acc, sm, spec = setting_summary(rs)
        reached = sum(1 for r in ok if r.get("steps_to_95") is not None)
        print(f"| {label} | {spec} of {len(rs)} | "
              f"{statistics.mean(acc):.3f}, {min(acc):.3f}-{max(acc):.3f} | {reached} of "
              f"{len(rs)} | {statistics.mean(sm):.2f}, {min(sm):.2f} |")


def tail_cell(runs):
    """'lowest (seed), k under 0.85' of a sweep's runs; a run not specialized counts under."""
    ok = [r for r in runs if r.get("ok")]
    low = min(ok, key=lambda r: r["s_match"])
    under = sum(1 for r in runs if not r.get("ok") or r["s_match"] < 0.85 or not specialized(r))
    return f"{low['s_match']:.3f} ({low['seed']}), {under} under"


def early_table(out):
    """Per variant: the lowest h = 4 s_match on each dev block, and h = 1 and 2 on seeds 1..10."""
    print("| recipe | lowest s_match, seeds 41-70 | seeds 11-40 | h = 1 eval accuracy (mean, "
          "highest) | h = 2 reached 95% |")
    print("|---|---|---|---|---|")
    for label, name in EARLY:
        cells = [tail_cell(all_runs(os.path.join(out, f"early-{name}-{b}"))[1]) for b in (41, 11)]
        h12 = runs_of(os.path.join(out, f"early-{name}-h12"))
        one = [r["eval_accuracy"] for r in h12 if r["values"]["model.heads"] == 1]
        two = [r for r in h12 if r["values"]["model.heads"] == 2]
        reached = sum(1 for r in two if r.get("steps_to_95") is not None)
        print(f"| {label} | {cells[0]} | {cells[1]} | {statistics.mean(one):.3f}, "
              f"{max(one):.3f} | {reached} of {len(two)} |")


def early_fresh_table(out):
    """The recipe and the one before it on seeds nobody tuned on, block by block."""
    print("| recipe | seeds | specialized | s_match | lowest s_match (seed) | under 0.85 |")
    print("|---|---|---|---|---|---|")
    for label, prefix in (("configs/dependency.toml", "early-fresh-recipe"),
                          ("the recipe, dropout_steps 400", "early-fresh-s400"),
                          ("the recipe before", "early-fresh-full")):
        for b in (71, 1001, 3001, 4001, 5001, 6001):
            path = os.path.join(out, f"{prefix}-{b}")
            if not os.path.exists(os.path.join(path, "sweep.json")):
                continue
            _, runs = all_runs(path)
            ok = [r for r in runs if r.get("ok")]
            seeds = sorted(r["seed"] for r in runs)
            low = min(ok, key=lambda r: r["s_match"])
            under = sum(1 for r in runs if not r.get("ok") or r["s_match"] < 0.85)
            print(f"| {label} | {seeds[0]}-{seeds[-1]} | "
                  f"{sum(1 for r in ok if specialized(r))} of {len(runs)} | "
                  f"{mean_sd([r['s_match'] for r in ok], 2)} | {low['s_match']:.2f} "
                  f"({low['seed']}) | {under} |")


# Every table, by name: (title, function of OUT). flagship-tables.sh prints them block by block
# (`flagship_tables.py OUT NAME...`); with no NAME, all of them in this order. A new table: a
# function here and its name in the block of flagship-tables.sh that measures its sweeps.
def tables(out):
    heads = lambda: runs_of(os.path.join(out, "heads")) + runs_of(os.path.join(out, "heads-3"))
    return {
        "heads": ("Head-count sweep", lambda: heads_table(heads())),
        "heads-101": ("Second seed range (seeds 101-120)",
                      lambda: heads_table(runs_of(os.path.join(out, "heads-101")))),
        "order": ("Order of the first claims", lambda: order_table(heads(), 4)),
        "pruning": ("Pruning", lambda: pruning_table(heads())),
        "layers": ("One layer vs two, with BEFORE_HEAD",
                   lambda: layers_table(runs_of(os.path.join(out, "layers")))),
        "composition": ("One layer vs two, with BEFORE_HEAD: configs/composition.toml",
                        lambda: composition_table(runs_of(os.path.join(out, "composition")))),
        "pruning-measures": ("Pruning, by importance measure",
                             lambda: pruning_measures_table(heads(), {
                                 m: runs_of(os.path.join(out, f"prune-{m}"))
                                 for m in ("mean_ablation", "patching")})),
        "cost": ("Cost of the timeline", lambda: cost_table(out)),
        "phase-width-dropout": ("Phase diagram: d_model x attention dropout (h = 4)",
                                lambda: grid_table(os.path.join(out, "phase-width-dropout"))),
        "phase-lr-positions": ("Phase diagram: learning rate x position scale (h = 4)",
                               lambda: grid_table(os.path.join(out, "phase-lr-positions"))),
        "levers": ("One lever at a time, from the phase diagram", lambda: levers_table(out)),
        "fresh": ("The recipe on seeds not tuned on (train.seed 1001 on)",
                  lambda: fresh_table(os.path.join(out, "fresh-1001"))),
        "race": ("Which relation loses under each breaking lever (h = 4, seeds 1..10)",
                 lambda: race_table(out, RACE)),
        "region": ("configs/dependency-region.toml, one lever at a time (seeds 1..10)",
                   lambda: settings_table(out, REGION)),
        "region-fresh": ("configs/dependency-region.toml on seeds not tuned on",
                         lambda: fresh_table(os.path.join(out, "region-fresh"))),
        "heads-bf16": ("The flagship in bf16 (h = 4, runtime.precision = \"bf16\")",
                       lambda: heads_table(runs_of(os.path.join(out, "heads-bf16")))),
        "early": ("Early dropout: the tail and the contrast, recipe by recipe",
                  lambda: early_table(out)),
        "early-levers": ("configs/dependency.toml, one lever at a time (seeds 1..10)",
                         lambda: settings_table(out, EARLY_LEVERS)),
        "early-fresh": ("configs/dependency.toml on seeds not tuned on",
                        lambda: early_fresh_table(out)),
        "early-s400": ("configs/dependency.toml with dropout until step 400: levers and "
                       "contrast (seeds 1..10)", lambda: contrast_table(out, EARLY_S400)),
        "early-phase-width-dropout": (
            "configs/dependency.toml: d_model x attention dropout (h = 4, seeds 1..10)",
            lambda: grid_table(os.path.join(out, "early-phase-width-dropout"), "dependency.toml")),
        "early-phase-lr-steps": (
            "configs/dependency.toml: learning rate x dropout steps (h = 4, seeds 1..10)",
            lambda: grid_table(os.path.join(out, "early-phase-lr-steps"), "dependency.toml")),
    }


def main():
    out, names = sys.argv[1], sys.argv[2:]
    known = tables(out)
    for name in names or list(known):
        if name not in known:
            raise SystemExit(f"flagship_tables.py: no table '{name}' (known: {', '.join(known)})")
        title, table = known[name]
        print(f"### {title}\n")
        table()
        print()


if __name__ == "__main__":
    main()
