"""Layers and optimizers from Python: parameters, state_dict() as NumPy views, load_state_dict,
optimizer steps against their formulas, schedules and errors."""

import numpy as np
import pytest

import headlab


def test_linear_forward_and_parameters_alias_the_state_dict():
    lin = headlab.Linear(3, 2, rng=headlab.Rng(1))
    names = [n for n, _ in lin.named_parameters()]
    assert names == ["weight", "bias"]
    state = lin.state_dict()
    assert list(state) == names and state["weight"].shape == (2, 3)
    x = np.array([[1.0, -2.0, 0.5]], dtype=np.float32)
    y = lin(headlab.Var(x))
    np.testing.assert_allclose(y.numpy(), x @ state["weight"].T + state["bias"], rtol=1e-6)
    # The views alias the live parameters, both ways.
    state["bias"][:] = 0.0
    assert lin.bias.numpy().tolist() == [0.0, 0.0]
    lin.weight.numpy()[0, 0] = 42.0
    assert lin.state_dict()["weight"][0, 0] == 42.0


def test_state_dict_round_trip_between_two_models():
    a = headlab.EncoderLayer(d_model=8, heads=2, d_ff=16, rng=1)
    b = headlab.EncoderLayer(d_model=8, heads=2, d_ff=16, rng=2)
    x = headlab.Var(np.linspace(-1, 1, 2 * 4 * 8, dtype=np.float32).reshape(2, 4, 8))
    assert not np.array_equal(a(x).numpy(), b(x).numpy())
    saved = {k: v.copy() for k, v in a.state_dict().items()}
    b.load_state_dict(saved)
    assert np.array_equal(a(x).numpy(), b(x).numpy())
    for k, v in b.state_dict().items():
        assert np.array_equal(v, saved[k])
        assert not np.shares_memory(v, saved[k])  # copied in, not adopted


def test_load_state_dict_lists_every_problem_and_changes_nothing():
    lin = headlab.Linear(3, 2)
    before = lin.state_dict()["weight"].copy()
    with pytest.raises(headlab.Error) as error:
        lin.load_state_dict({"weight": np.zeros((3, 3), dtype=np.float32), "extra": np.zeros(1)})
    text = str(error.value)
    assert "weight" in text and "extra" in text and "bias" in text
    assert np.array_equal(lin.state_dict()["weight"], before)


def test_attention_layers_and_the_registry():
    attn = headlab.MultiHeadAttention(d_model=8, heads=2, rng=0)
    x = headlab.Var(np.ones((1, 3, 8), dtype=np.float32))
    out, weights = attn(x, need_weights=True)
    assert out.shape == (1, 3, 8) and weights.shape == (1, 2, 3, 3)
    np.testing.assert_allclose(weights.numpy().sum(-1), 1.0, rtol=1e-6)
    causal = np.triu(np.ones((3, 3), dtype=np.float32), 1)
    _, masked = attn(x, attn_mask=causal, need_weights=True)
    assert masked.numpy()[0, :, 0, 1:].max() == 0.0
    names = [n for n, _ in attn.named_parameters()]
    assert names == ["in_proj_weight", "in_proj_bias", "w_o.weight", "w_o.bias"]
    ln = headlab.layer("layer_norm", d_model=8)
    assert ln(x).shape == (1, 3, 8)
    with pytest.raises(headlab.Error, match="unknown layer"):
        headlab.layer("no_such_layer")
    with pytest.raises(headlab.Error, match=r"linear.*\[1, 3, 8\]|\[1, 3, 8\].*linear|8.*4"):
        headlab.Linear(4, 2)(x)


def test_backward_through_a_layer_fills_parameter_grads():
    ffn = headlab.FeedForward(d_model=4, d_ff=8, activation="gelu", rng=3)
    x = headlab.Var(np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4))
    assert all(p.grad is None for p in ffn.parameters())
    ffn(x).sum().backward()
    assert all(p.grad is not None and np.abs(p.grad).sum() > 0 for p in ffn.parameters())
    ffn.zero_grad()
    assert all(np.all(p.grad == 0) for p in ffn.parameters())


def test_sgd_and_adam_steps_follow_their_formulas():
    p = headlab.Var(np.array([1.0, -2.0], dtype=np.float32), requires_grad=True)
    sgd = headlab.SGD([p], lr=0.1)
    (p * p).sum().backward()
    sgd.step()
    np.testing.assert_allclose(p.numpy(), [1.0 - 0.1 * 2.0, -2.0 + 0.1 * 4.0], rtol=1e-6)
    assert sgd.step_count == 1 and sgd.name == "sgd"

    q = headlab.Var(np.array([0.5], dtype=np.float32), requires_grad=True)
    adam = headlab.Adam([("q", q)], lr=0.01)
    (q * 3.0).sum().backward()
    adam.step()
    # First Adam step: m_hat / sqrt(v_hat) = sign(g), so q moves by lr (up to eps).
    np.testing.assert_allclose(q.numpy(), [0.5 - 0.01], rtol=1e-5)
    state = adam.state_dict()
    assert set(state) == {"exp_avg.q", "exp_avg_sq.q", "step"}
    np.testing.assert_allclose(state["exp_avg.q"], [0.1 * 3.0], rtol=1e-6)
    adam.zero_grad()
    assert q.grad.tolist() == [0.0]


def test_make_optimizer_registry_names_and_errors():
    lin = headlab.Linear(2, 2)
    opt = headlab.make_optimizer("adamw", lin, lr=1e-3, weight_decay=0.1, no_decay=["*bias"])
    assert opt.name == "adamw" and [n for n, _ in opt.parameters()] == ["weight", "bias"]
    assert {"adam", "adamw", "sgd"} <= set(headlab.registered_optimizers())
    with pytest.raises(headlab.Error, match="optimizer: name is \"nope\" but expected one of"):
        headlab.make_optimizer("nope", lin)
    with pytest.raises(headlab.Error, match="lr"):
        headlab.SGD(lin, lr=-1.0)


def test_schedules():
    s = headlab.Schedule.warmup_cosine(1.0, warmup_steps=2, total_steps=4)
    assert [s.lr_at(k) for k in (1, 2)] == [0.5, 1.0]
    assert s.lr_at(4) == pytest.approx(0.0, abs=1e-12)
    c = headlab.make_schedule("constant", 0.3, warmup_steps=0)
    assert c(10) == pytest.approx(0.3) and c.name == "constant"
    with pytest.raises(headlab.Error, match="schedule"):
        headlab.make_schedule("nope", 0.1)


def test_encoder_from_python_trains_one_step():
    enc = headlab.Encoder(vocab_sizes=[11], max_len=6, d_model=8, heads=2, layers=2, d_ff=16,
                          num_classes=5, rng=4)
    ids = np.array([[1, 2, 3, 4], [5, 6, 7, 0]])
    padding = np.array([[0, 0, 0, 0], [0, 0, 0, 1]], dtype=np.float32)
    out = enc(ids, key_padding_mask=padding, need_weights=True)
    assert out.logits.shape == (2, 4, 5) and out.hidden.shape == (2, 4, 8)
    assert len(out.weights) == 2 and out.weights[0].shape == (2, 2, 4, 4)
    assert out.weights[1].numpy()[1, :, :, 3].max() == 0.0  # the padding key gets no weight
    assert enc.num_layers == 2 and enc.layer(1).attn.head_gate.shape == (2,)
    names = [n for n, _ in enc.named_parameters()]
    assert len(names) == len(set(names)) and any(n.startswith("layers.1.") for n in names)
    opt = headlab.Adam(enc, lr=0.01)
    loss = headlab.cross_entropy(out.logits, ids % 5)
    loss.backward()
    opt.step()
    opt.zero_grad()
    assert headlab.cross_entropy(enc([ids]).logits, ids % 5).item() < loss.item()
    with pytest.raises(headlab.Error, match=r"Encoder: features shape is \[4\] but expected"):
        enc(np.array([1, 2, 3, 4]))
    with pytest.raises(headlab.Error, match="out of range"):
        enc.layer(2)
