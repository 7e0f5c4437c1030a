#!/usr/bin/env python3
"""The induction table of README.md from a sweep over model.layers (configs/induction.toml).

    python3 scripts/induction_tables.py runs/sweep-induction

Reads each run's timeline.jsonl ("induction" rows, train/analysis/induction.h) and prints one
markdown row per number of layers and heads. Definitions (docs/analysis.md, "Induction heads"):
  previous-token head: a layer-0 head whose previous-token score at the end exceeds 0.5;
  L0 previous-token sum: the layer-0 heads' previous-token scores added up, the share of the
    previous token that layer 0 moves as a whole (it can be spread over several heads);
  induction head: a head of layer >= 1 whose induction score exceeds 0.5 at the end (a 1-layer
    model's heads are scored too, as "layer-0 induction", which should stay below 0.5);
  formation step: the first evaluation where the best induction score reaches the midpoint
    between its first and its final value (only for a run that has an induction head);
  in-context jump: likewise, the first evaluation where the in-context score reaches the
    midpoint between its first and its final value;
  "within the window" when the jump lies within WINDOW steps of the formation step.
"""
import json
import pathlib
import statistics
import sys

THRESHOLD = 0.5
WINDOW = 200


def rows(run):
    with open(run / "timeline.jsonl") as f:
        return [json.loads(line) for line in f if line.strip()]


def midpoint_step(tl, value):
    """The first step where value(row) has gone half of the way from its first to its final
    value (in either direction), or None when it does not move."""
    start, end = value(tl[0]), value(tl[-1])
    if start == end:
        return None
    mid = (start + end) / 2
    rising = end > start
    return next(r["step"] for r in tl if (value(r) >= mid if rising else value(r) <= mid))


def measure(run):
    tl = rows(run)
    last = tl[-1]["induction"]
    layers = len(last["induction"])
    prev_end = max(last["previous_token"][0])
    prev_sum = sum(last["previous_token"][0])
    best_induction = lambda r: max(max(l) for l in r["induction"]["induction"][1:]) if layers > 1 \
        else max(r["induction"]["induction"][0])
    has_head = best_induction(tl[-1]) > THRESHOLD
    forms = midpoint_step(tl, best_induction) if has_head else None
    icl = lambda r: r["induction"]["in_context_score"]
    final_icl = icl(tl[-1])
    jump = midpoint_step(tl, icl)
    return {
        "layers": layers,
        "heads": len(last["previous_token"][0]),
        "loss": tl[-1]["loss"],
        "icl": final_icl,
        "prev": prev_end,
        "prev_sum": prev_sum,
        "induction": best_induction(tl[-1]),
        "forms": forms,
        "jump": jump,
        "within": forms is not None and jump is not None and abs(jump - forms) <= WINDOW,
    }


def main(sweep):
    runs = sorted(p for p in pathlib.Path(sweep).iterdir() if (p / "timeline.jsonl").exists())
    by_layers = {}
    for run in runs:
        m = measure(run)
        by_layers.setdefault((m["layers"], m["heads"]), []).append(m)
    print("| layers | heads | seeds | eval loss | in-context score | L0 previous-token score (lowest) "
          "| previous-token head | L0 previous-token sum (lowest) | best induction score (highest) | induction head | forms at step (midpoint) "
          f"| in-context jump at step (midpoint) | jump within {WINDOW} steps |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for (layers, heads), ms in sorted(by_layers.items()):
        n = len(ms)
        mean = lambda k: statistics.mean(m[k] for m in ms)
        formed = [m["forms"] for m in ms if m["forms"] is not None]
        with_head = sum(m["induction"] > THRESHOLD for m in ms)
        jumps = [m["jump"] for m in ms if m["jump"] is not None]
        span = lambda v: "never" if not v else f"{min(v)}-{max(v)}"
        print(f"| {layers} | {heads} | {n} | {mean('loss'):.3f} | {mean('icl'):.2f} "
              f"| {mean('prev'):.2f} ({min(m['prev'] for m in ms):.2f}) "
              f"| {sum(m['prev'] > THRESHOLD for m in ms)} of {n} "
              f"| {mean('prev_sum'):.2f} ({min(m['prev_sum'] for m in ms):.2f}) "
              f"| {mean('induction'):.2f} ({max(m['induction'] for m in ms):.2f}) "
              f"| {with_head} of {n} | {span(formed)} | {span(jumps)} "
              f"| {sum(m['within'] for m in ms)} of {n} |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "runs/sweep-induction")
