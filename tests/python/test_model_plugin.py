"""A model whose layers and task come from a plugin (examples/plugin: ALiBi attention, SwiGLU,
the mirror task) loads from Python as in `headlab eval`: the run's plugin is loaded from run.json
before its config is read, and its attention's hook points are the analysis'."""

import pathlib

import headlab  # before NumPy: the OpenMP OpenBLAS (docs/python.md)
import numpy as np
import pytest

from model_common import CLI, SOURCE, read_attention, read_heads, train_run

PLUGIN = pathlib.Path(CLI).resolve().parent / "tests" / "plugins" / "libheadlab_example_plugin.so"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    if not PLUGIN.is_file():
        pytest.skip(f"the example plugin is not built ({PLUGIN})")
    return train_run(tmp_path_factory.mktemp("plugin") / "run",
                     config=SOURCE / "examples" / "plugin" / "plugin.toml",
                     sets=["train.steps=40", "train.eval_every=20", "train.checkpoint_every=20"],
                     plugins=[PLUGIN])


def test_the_runs_plugin_is_loaded_with_it(run):
    model = headlab.load_model(str(run))  # the plugin comes from run.json
    assert model.task == "mirror"
    assert "blocks.0.attn.hook_pattern" in model.hook_points()
    names = [f"blocks.{l}.attn.hook_pattern" for l in range(model.layers)]
    cache = model.run_with_cache(model.eval_batch(0), names=names)
    attention = read_attention(run)
    mine = np.stack([cache[n][:attention.shape[0]] for n in names], axis=1)
    assert np.array_equal(mine, attention)


def test_zero_ablation_of_a_plugin_attention(run):
    model = headlab.load_model(str(run), plugins=[str(PLUGIN)])  # loaded once, by path
    head = read_heads(run)["layers"][0]["heads"][1]
    got = headlab.evaluate(model, {"blocks.0.attn.hook_z": lambda z: headlab.zero_head(z, 1)})
    assert got["accuracy"] == head["ablation_accuracy"]


def test_a_plugin_that_is_not_there_is_named(run, tmp_path):
    missing = tmp_path / "libnothing.so"
    with pytest.raises(headlab.Error, match="libnothing.so"):
        headlab.load_model(str(run), plugins=[str(missing)])
