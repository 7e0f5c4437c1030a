"""headlab.load_model: a trained run's model from Python, its hook points equal to what the
analysis measured on the same checkpoint (attention.npy, heads.json's zero ablation)."""

import headlab  # before NumPy: the OpenMP OpenBLAS (docs/python.md)
import numpy as np
import pytest

from model_common import read_attention, read_heads, train_run


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return train_run(tmp_path_factory.mktemp("model") / "run")


@pytest.fixture(scope="module")
def model(run):
    return headlab.load_model(str(run))


def test_loads_the_latest_checkpoint(run, model):
    assert model.step == 60
    assert model.task == "dependency"
    assert model.relations == ["PREV", "HEAD", "SEM"]
    assert pathlib_name(model.checkpoint) == "step-000060"
    earlier = headlab.load_model(str(run), checkpoint="step-000030")
    assert earlier.step == 30


def pathlib_name(path):
    return path.rstrip("/").rsplit("/", 1)[-1]


def test_hook_points_are_the_encoders(model):
    points = model.hook_points()
    for name in ["hook_embed", "blocks.0.hook_resid_pre", "blocks.0.attn.hook_q",
                 "blocks.0.attn.hook_pattern", "blocks.0.attn.hook_z",
                 "blocks.0.hook_resid_mid", "blocks.0.mlp.hook_post", "blocks.0.hook_resid_post"]:
        assert name in points


def test_run_with_cache_equals_attention_npy(run, model):
    attention = read_attention(run)  # [examples, layers, heads, T, T]
    examples = attention.shape[0]
    names = [f"blocks.{l}.attn.hook_pattern" for l in range(model.layers)]
    cache = model.run_with_cache(model.eval_batch(0), names=names)
    mine = np.stack([cache[n][:examples] for n in names], axis=1)
    assert mine.shape == attention.shape
    assert np.array_equal(mine, attention)


def test_cache_shapes_and_predictions(model):
    batch = model.eval_batch(1)
    B, T = batch["labels"].shape
    cache = model.run_with_cache(batch)
    assert cache["blocks.0.attn.hook_z"].shape == (B, T, model.heads, 64 // model.heads)
    assert cache["logits"].shape == (B, T, model.num_classes)
    assert np.array_equal(cache["predictions"], cache["logits"].argmax(-1))


def test_zeroing_a_head_equals_the_analysis_ablation(run, model):
    heads = read_heads(run)
    for layer in heads["layers"]:
        for head in layer["heads"]:
            l, h = layer["layer"], head["head"]
            point = f"blocks.{l}.attn.hook_z"
            got = headlab.evaluate(model, {point: lambda z, h=h: headlab.zero_head(z, h)})
            assert got["accuracy"] == head["ablation_accuracy"], (l, h)
    assert headlab.evaluate(model)["accuracy"] == heads["eval_accuracy"]


def test_an_identity_hook_changes_nothing(model):
    batch = model.eval_batch(0)
    plain = model.run_with_cache(batch, names=[])
    hooked = model.run_with_hooks(batch, {"blocks.0.hook_resid_mid": lambda x: x})
    assert np.array_equal(plain["logits"], hooked["logits"])


def test_a_hook_sees_the_point_and_can_patch_it(model):
    clean, other = model.eval_batch(0), model.eval_batch(1)
    source = model.run_with_cache(other, names=["blocks.0.attn.hook_z"])["blocks.0.attn.hook_z"]
    seen = []

    def patch(z):
        seen.append(z.shape)
        return headlab.patch_head(z, source, 0)

    patched = model.run_with_hooks(clean, {"blocks.0.attn.hook_z": patch},
                                   names=["blocks.0.attn.hook_z"])
    assert seen == [source.shape]
    # The cache holds the value that reached the point, before the edit.
    plain = model.run_with_cache(clean, names=["blocks.0.attn.hook_z"])
    assert np.array_equal(patched["blocks.0.attn.hook_z"], plain["blocks.0.attn.hook_z"])
    assert not np.array_equal(patched["logits"], plain["logits"])


def test_a_wrong_shape_is_a_headlab_error(model):
    with pytest.raises(headlab.Error, match=r"blocks\.0\.attn\.hook_z.*\[48, 17, 4\].*"
                                            r"\[48, 17, 4, 16\]"):
        model.run_with_hooks(model.eval_batch(0), {"blocks.0.attn.hook_z": lambda z: z[..., 0]})


def test_a_python_exception_in_a_hook_reaches_the_caller(model):
    def fails(z):
        raise ValueError("from the hook")

    with pytest.raises(ValueError, match="from the hook"):
        model.run_with_hooks(model.eval_batch(0), {"blocks.0.attn.hook_z": fails})
    # The model is usable afterwards (the hooks were detached).
    assert model.run_with_cache(model.eval_batch(0), names=[])["logits"].shape[0] == 48


def test_an_unknown_point_is_named(model):
    with pytest.raises(headlab.Error, match="blocks.7.attn.hook_z"):
        model.run_with_cache(model.eval_batch(0), names=["blocks.7.attn.hook_z"])


def test_encode_reads_the_tasks_tokens(model):
    batch = model.eval_batch(0)
    tokens = batch["tokens"][:3]
    by_sentence = model.encode([" ".join(t) for t in tokens])
    by_list = model.encode([t[1:] for t in tokens])  # BOS is added when it is not there
    for encoded in (by_sentence, by_list):
        for name, ids in encoded["features"].items():
            assert np.array_equal(ids, batch["features"][name][:3])
    assert by_sentence["tokens"] == tokens
    ids = np.stack([batch["features"][f][:2] for f in model.features])  # [F, B, T]
    assert np.array_equal(model.encode(ids)["features"]["colour"], batch["features"]["colour"][:2])
    a = model.run_with_cache(" ".join(tokens[0]), names=[])["logits"]
    b = model.run_with_cache(batch, names=[])["logits"][:1]
    assert np.allclose(a, b, atol=1e-5)


def test_encode_refuses_what_the_task_does_not_read(model):
    words = model.eval_batch(0)["tokens"][0][1:]
    with pytest.raises(headlab.Error, match="token 3 'NOUN:9' is not a token"):
        model.encode([" ".join(words[:2] + ["NOUN:9"] + words[3:])])
    with pytest.raises(headlab.Error, match="reads sequences of 17"):
        model.encode(["SUBJ:1 VERB:0"])
    with pytest.raises(headlab.Error, match=r"\[F, B, T\]"):
        model.encode(np.zeros((2, 17), dtype=np.int32))
    with pytest.raises(headlab.Error, match="outside"):
        model.encode({"category": np.full((1, 17), 99), "colour": np.zeros((1, 17), int)})


def test_a_run_that_is_not_there_is_a_headlab_error(tmp_path):
    with pytest.raises(headlab.Error):
        headlab.load_model(str(tmp_path / "missing"))


def test_a_forward_started_at_a_point_equals_the_whole_forward(model):
    batch = model.eval_batch(0)
    point = "blocks.0.attn.hook_z"
    whole = model.run_with_cache(batch, names=[point, "blocks.0.hook_resid_pre"])
    starts = {p: whole[p] for p in [point, "blocks.0.hook_resid_pre"]}
    started = model.run_with_cache(batch, names=[], start_at=starts)
    assert np.array_equal(started["logits"], whole["logits"])
    # An edit at the start applies to the start's value, as run_with_hooks without a start.
    edit = {point: lambda z: headlab.zero_head(z, 1)}
    assert np.array_equal(model.run_with_hooks(batch, edit, start_at=starts)["logits"],
                          model.run_with_hooks(batch, edit)["logits"])
    other = model.run_with_cache(batch, names=[], start_at={point: np.zeros_like(whole[point])})
    assert not np.array_equal(other["logits"], whole["logits"])


def test_a_bad_start_is_a_headlab_error(model):
    batch = model.eval_batch(0)
    z = model.run_with_cache(batch, names=["blocks.0.attn.hook_z"])["blocks.0.attn.hook_z"]
    with pytest.raises(headlab.Error, match="the forward passed no hook point 'blocks.7.attn"):
        model.run_with_cache(batch, names=[], start_at={"blocks.7.attn.hook_z": z})
    with pytest.raises(headlab.Error, match="the start at hook_z"):
        model.run_with_cache(batch, names=[], start_at={"blocks.0.attn.hook_z": z[:, :, :1]})
    with pytest.raises(headlab.Error, match="not an array"):
        model.run_with_cache(batch, names=[], start_at={"blocks.0.attn.hook_z": "zeros"})
