"""Shared by tests/python/test_model*.py: a short run of the test config trained by this build's
CLI into a temporary directory, its analysis included (heads.json, attention.npy)."""

import json
import os
import pathlib
import subprocess

import numpy as np

SOURCE = pathlib.Path(os.environ.get("HEADLAB_SOURCE", pathlib.Path(__file__).parents[2]))
CLI = os.environ.get("HEADLAB_CLI", "headlab")

# configs/tiny.toml, shorter: enough steps that heads differ, two evaluation batches of 48.
SHORT = ["train.steps=60", "train.eval_every=30", "train.checkpoint_every=30",
         "train.eval_batches=2", "train.eval_batch_size=48"]


def train_run(out, config=SOURCE / "configs" / "tiny.toml", sets=SHORT, plugins=()):
    command = [CLI, "train", str(config), "--out", str(out), "--no-progress", "--quiet"]
    for s in sets:
        command += ["--set", s]
    for p in plugins:
        command += ["--plugin", str(p)]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return pathlib.Path(out)


def read_heads(run):
    return json.loads((run / "heads.json").read_text())


def read_attention(run):
    return np.load(run / "attention.npy")
