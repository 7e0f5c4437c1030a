#!/usr/bin/env python3
"""Markdown tables of docs/analysis.md and the README from the sweeps of flagship-tables.sh.

usage: flagship_tables.py OUT   (the directory scripts/flagship-tables.sh wrote)

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


def pruning_table(runs):
    print("| heads | specialized heads last to go | accuracy, only they left | "
          "accuracy, one head left |")
    print("|---|---|---|---|")
    for h in (4, 8):
        rs = [r for r in runs if r["values"]["model.heads"] == h]
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
        print(f"| {h} | {last} of {len(rs)} | {mean_sd(only)} | {mean_sd(one)} |")


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


def main():
    out = sys.argv[1]
    heads = runs_of(os.path.join(out, "heads")) + runs_of(os.path.join(out, "heads-3"))
    sections = [("Head-count sweep", lambda: heads_table(heads)),
                ("Second seed range (seeds 101-120)",
                 lambda: heads_table(runs_of(os.path.join(out, "heads-101")))),
                ("Order of the first claims", lambda: order_table(heads, 4)),
                ("Pruning", lambda: pruning_table(heads)),
                ("One layer vs two, with BEFORE_HEAD",
                 lambda: layers_table(runs_of(os.path.join(out, "layers")))),
                ("Cost of the timeline", lambda: cost_table(out))]
    for title, table in sections:
        print(f"### {title}\n")
        table()
        print()


if __name__ == "__main__":
    main()
