#!/usr/bin/env python3
"""Activation patching from Python: train the flagship, find the head that claims PREV, patch its
output from one sentence into another and see what the model loses.

The flagship (configs/dependency.toml) learns three relations with four heads; the head analysis
(heads.json) says which head took which. Each word's label carries its PREV partner's colour, so
a model whose PREV head reads another sentence's previous words should lose its PREV component,
and keep most of HEAD and SEM (another head's). The script prints the accuracy and component
accuracies of the run's evaluation sentences before and after, and plots that head's attention
on one sentence when matplotlib is installed.

    PYTHONPATH=<prefix>/lib/python3/dist-packages python3 patch_prev_head.py [--out DIR]
        [--set train.steps=300 ...] [--plot attention.png]
"""

import argparse
import pathlib
import sys

import headlab  # before NumPy: headlab runs on the OpenMP OpenBLAS (docs/python.md)
import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
# The source tree's configs/, or the installed share/headlab/configs.
FLAGSHIP = HERE.parent.parent / "configs" / "dependency.toml"


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default=str(FLAGSHIP), help="the config to train (the flagship)")
    p.add_argument("--out", default="runs/patch_prev_head", help="the run directory")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config key, as headlab train --set does (repeatable)")
    p.add_argument("--plot", default=None,
                   help="where to save the attention plot (default: OUT/prev_head.png)")
    return p.parse_args()


def rolled(batch):
    """The batch's sentences, each replaced by the next one: the source of the patch."""
    return {"features": {name: np.roll(ids, 1, axis=0)
                         for name, ids in batch["features"].items()}}


def measure(model, patch_layer=None, patch_head=None):
    """Accuracy over the evaluation batches, with one head's output (hook_z) patched from the
    batch's other sentences when a head is given."""
    def hooks(i):
        if patch_head is None:
            return {}
        point = f"blocks.{patch_layer}.attn.hook_z"
        source = model.run_with_cache(rolled(model.eval_batch(i)), names=[point])[point]
        return {point: lambda z: headlab.patch_head(z, source, patch_head)}

    return headlab.evaluate(model, hooks)


def describe(name, result):
    parts = "  ".join(f"{r} {a:.3f}" for r, a in result["component_accuracy"].items())
    print(f"{name:<24} accuracy {result['accuracy']:.3f}  {parts}")


def plot(model, layer, head, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot")
        return
    batch = model.eval_batch(0)
    point = f"blocks.{layer}.attn.hook_pattern"
    pattern = model.run_with_cache(batch, names=[point])[point][0, head]  # [T, T]
    tokens = batch["tokens"][0]
    fig, ax = plt.subplots(figsize=(7, 6))
    ax.imshow(pattern, cmap="viridis", vmin=0.0, vmax=1.0)
    ax.set_xticks(range(len(tokens)), tokens, rotation=90, fontsize=7)
    ax.set_yticks(range(len(tokens)), tokens, fontsize=7)
    ax.set_xlabel("key")
    ax.set_ylabel("query")
    ax.set_title(f"L{layer} H{head} (claims PREV): attention on sentence 0")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"wrote {path}")


def main():
    args = parse_args()
    overrides = dict(s.split("=", 1) for s in args.set)
    run = headlab.train(args.config, out=args.out, overrides=overrides, overwrite=True)
    claimed = run.heads["specialization"]["assignment"].get("PREV")
    if claimed is None:
        print("no head claims PREV in heads.json (train longer: --set train.steps=1000)")
        return 1
    layer, head = claimed
    model = run.model()
    print(f"{model}: L{layer} H{head} claims PREV")
    clean = measure(model)
    patched = measure(model, layer, head)
    describe("clean", clean)
    describe(f"L{layer} H{head} patched", patched)
    change = patched["accuracy"] - clean["accuracy"]
    prev = patched["component_accuracy"]["PREV"] - clean["component_accuracy"]["PREV"]
    print(f"accuracy change {change:+.3f} (PREV component {prev:+.3f})")
    plot(model, layer, head, args.plot or str(pathlib.Path(args.out) / "prev_head.png"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
