"""Var, the ops and backward(): values against NumPy, gradients against finite differences."""

import math
import zlib

import numpy as np
import pytest

import headlab


def rand(rng, *shape):
    return rng.uniform(-1.0, 1.0, size=shape).astype(np.float32)


def np_softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def np_layer_norm(x, g, b, eps=1e-5):
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * g + b


np_erf = np.vectorize(math.erf)

# name, headlab function of Vars, NumPy reference (float64), input shapes
CASES = [
    ("matmul @", lambda a, b: a @ b, lambda a, b: a @ b, [(3, 4), (4, 2)]),
    ("batched @", lambda a, b: a @ b, lambda a, b: a @ b, [(2, 3, 4), (2, 4, 5)]),
    ("add broadcast", lambda a, b: a + b, lambda a, b: a + b, [(2, 3, 4), (3, 1)]),
    ("sub", lambda a, b: a - b, lambda a, b: a - b, [(3, 4), (4,)]),
    ("mul", lambda a, b: a * b, lambda a, b: a * b, [(3, 4), (3, 4)]),
    ("div", lambda a, b: a / (b * b + 1.0), lambda a, b: a / (b * b + 1.0), [(3, 4), (3, 4)]),
    ("scalars", lambda a: 2.0 * a - 1.0 + a / 4.0, lambda a: 2 * a - 1 + a / 4, [(5,)]),
    ("neg pow", lambda a: -(a ** 3.0), lambda a: -(a ** 3), [(5,)]),
    ("relu", lambda a: a.relu(), lambda a: np.maximum(a, 0), [(4, 5)]),
    ("gelu", headlab.gelu, lambda a: 0.5 * a * (1 + np_erf(a / math.sqrt(2))), [(4, 5)]),
    ("tanh", headlab.tanh, np.tanh, [(4, 5)]),
    ("sigmoid", headlab.sigmoid, lambda a: 1 / (1 + np.exp(-a)), [(4, 5)]),
    ("exp", headlab.exp, np.exp, [(4, 5)]),
    ("softmax", headlab.softmax, np_softmax, [(3, 6)]),
    ("log_softmax", lambda a: a.log_softmax(), lambda a: np.log(np_softmax(a)), [(3, 6)]),
    ("layer_norm", lambda x, g, b: headlab.layer_norm(x, g, b), np_layer_norm,
     [(2, 3, 6), (6,), (6,)]),
    ("sum dim", lambda a: a.sum(1), lambda a: a.sum(axis=1), [(3, 4, 2)]),
    ("mean keepdim", lambda a: a.mean(-1, keepdim=True), lambda a: a.mean(-1, keepdims=True),
     [(3, 4)]),
    ("sum all", lambda a: a.sum(), lambda a: np.array([a.sum()]), [(3, 4)]),
    ("mean all", headlab.mean, lambda a: np.array([a.mean()]), [(3, 4)]),
    ("reshape", lambda a: a.reshape(4, 3), lambda a: a.reshape(4, 3), [(2, 6)]),
    ("transpose", lambda a: a.T, lambda a: np.swapaxes(a, -1, -2), [(2, 3, 4)]),
    ("permute", lambda a: a.permute(2, 0, 1), lambda a: a.transpose(2, 0, 1), [(2, 3, 4)]),
    ("concat", lambda a, b: headlab.concat([a, b], 1), lambda a, b: np.concatenate([a, b], 1),
     [(2, 3), (2, 2)]),
    ("slice", lambda a: headlab.slice(a, 1, 1, 3), lambda a: a[:, 1:3], [(2, 4)]),
    ("einsum", lambda a, b: headlab.einsum("ij,kj->ik", a, b),
     lambda a, b: np.einsum("ij,kj->ik", a, b), [(3, 4), (2, 4)]),
    ("linear relu", lambda x, w, b: headlab.linear(x, w, b, relu=True),
     lambda x, w, b: np.maximum(x @ w.T + b, 0), [(3, 4), (5, 4), (5,)]),
]


# Where an op has a kink, the inputs that feed it (as a float64 function of the inputs) must stay
# clear of it: a central difference across the kink is no gradient.
KINKS = {
    "relu": lambda a: a,
    "linear relu": lambda x, w, b: x @ w.T + b,
}


def draw_inputs(name, shapes):
    """Inputs for one case, the same on every run: the seed comes from the name through a stable
    hash (Python's hash() of a str changes with each process), and kinked cases draw again until
    every pre-activation is 0.05 or more from the kink (the differences step 1e-2)."""
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    while True:
        inputs = [rand(rng, *s) for s in shapes]
        kink = KINKS.get(name)
        if kink is None or np.abs(kink(*[a.astype(np.float64) for a in inputs])).min() >= 0.05:
            return rng, inputs


def finite_difference(f, inputs, weights, eps=1e-2):
    """d sum(f(inputs) * weights) / d inputs, by central differences (float64 accumulation)."""
    grads = []
    for x in inputs:
        g = np.zeros(x.shape, dtype=np.float64)
        for i in np.ndindex(x.shape):
            saved = x[i]
            x[i] = saved + eps
            plus = (f(*[headlab.Var(a) for a in inputs]).numpy() * weights).sum(dtype=np.float64)
            x[i] = saved - eps
            minus = (f(*[headlab.Var(a) for a in inputs]).numpy() * weights).sum(dtype=np.float64)
            x[i] = saved
            g[i] = (plus - minus) / (2 * eps)
        grads.append(g)
    return grads


@pytest.mark.parametrize("name, f, reference, shapes", CASES, ids=[c[0] for c in CASES])
def test_op_values_and_gradients(name, f, reference, shapes):
    rng, inputs = draw_inputs(name, shapes)
    variables = [headlab.Var(a.copy(), requires_grad=True) for a in inputs]
    out = f(*variables)
    expected = reference(*[a.astype(np.float64) for a in inputs])
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-4, atol=1e-5)

    weights = rand(rng, *out.shape)
    loss = (out * headlab.Var(weights)).sum()
    loss.backward()
    numeric = finite_difference(f, inputs, weights)
    for v, g in zip(variables, numeric):
        assert v.grad is not None and v.grad.shape == v.shape
        np.testing.assert_allclose(v.grad, g, rtol=2e-2, atol=2e-3, err_msg=name)


def test_cross_entropy_value_and_gradient():
    rng = np.random.default_rng(1)
    logits = rand(rng, 4, 5)
    targets = np.array([0, 3, 4, 1], dtype=np.int64)
    x = headlab.Var(logits.copy(), requires_grad=True)
    loss = headlab.cross_entropy(x, targets)
    p = np_softmax(logits.astype(np.float64))
    expected = -np.log(p[np.arange(4), targets]).mean()
    assert loss.shape == (1,)
    assert loss.item() == pytest.approx(expected, rel=1e-5)
    loss.backward()
    onehot = np.eye(5)[targets]
    np.testing.assert_allclose(x.grad, (p - onehot) / 4, rtol=1e-4, atol=1e-6)
    with pytest.raises(headlab.Error, match="cross_entropy: array dtype is float32"):
        headlab.cross_entropy(x, np.zeros(4, dtype=np.float32))


def test_grad_is_a_view_that_accumulates_and_zero_grad_clears_in_place():
    w = headlab.Var(np.array([1.0, 2.0], dtype=np.float32), requires_grad=True)
    assert w.grad is None and w.is_leaf and w.requires_grad
    (w * w).sum().backward()
    g = w.grad
    assert g.tolist() == [2.0, 4.0]
    (w * 3.0).sum().backward()
    assert g.tolist() == [5.0, 7.0]  # the same buffer, accumulated
    w.zero_grad()
    assert g.tolist() == [0.0, 0.0]
    # Editing the value through NumPy is what the next forward sees.
    w.numpy()[:] = [10.0, 0.0]
    assert (w * w).sum().item() == 100.0


def test_backward_with_a_seed_and_without_grad_inputs():
    x = headlab.Var(np.ones((2, 2), dtype=np.float32), requires_grad=True)
    y = x * 2.0
    y.backward(np.array([[1, 2], [3, 4]], dtype=np.float32))
    assert x.grad.tolist() == [[2, 4], [6, 8]]
    with pytest.raises(headlab.Error):
        (x * 2.0).backward()  # not a scalar and no seed
    with pytest.raises(headlab.Error):
        headlab.Var(np.ones(1, dtype=np.float32)).sum().backward()  # nothing requires grad


def test_no_grad_records_nothing_and_restores():
    x = headlab.Var(np.ones(3, dtype=np.float32), requires_grad=True)
    assert headlab.grad_enabled()
    with headlab.no_grad():
        assert not headlab.grad_enabled()
        with headlab.no_grad():
            pass
        assert not headlab.grad_enabled()
        y = (x * 2.0).sum()
    assert headlab.grad_enabled()
    assert y.is_leaf and not y.requires_grad
    with pytest.raises(headlab.Error):
        y.backward()


def test_shape_errors_name_the_op_and_both_shapes():
    a = headlab.Var(np.zeros((2, 3), dtype=np.float32))
    b = headlab.Var(np.zeros((4, 5), dtype=np.float32))
    with pytest.raises(headlab.Error, match=r"matmul.*\[2, 3\].*\[4, 5\]|matmul.*\[4, 5\].*\[2, 3\]"):
        a @ b
    with pytest.raises(headlab.Error, match=r"add.*\[2, 3\].*\[4, 5\]"):
        a + b
    with pytest.raises(headlab.Error, match=r"reshape"):
        a.reshape(5)
    with pytest.raises(headlab.Error, match=r"layer_norm"):
        headlab.layer_norm(a, headlab.Var(np.ones(4, dtype=np.float32)))


def test_numpy_operands_defer_to_var():
    x = headlab.Var(np.ones(2, dtype=np.float32))
    assert isinstance(2.0 * x, headlab.Var)
    assert (1.0 - x).numpy().tolist() == [0.0, 0.0]
    assert (3.0 / (x + 1.0)).numpy().tolist() == [1.5, 1.5]
    assert "requires_grad" not in repr(x) and repr(x).startswith("headlab.Var([1., 1.]")
