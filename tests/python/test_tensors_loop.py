"""A training loop written in Python equals the same loop in C++ bit for bit.

The C++ twins live in tests/python/tensor_loop_twin.cpp (built with the suite, its path in
HEADLAB_TENSOR_LOOP_TWIN); each writes its losses and final parameters as float32 bytes.
"""

import os
import subprocess

import numpy as np
import pytest

import headlab

TWIN = os.environ.get("HEADLAB_TENSOR_LOOP_TWIN")


def fixed_inputs(*shape):
    i = np.arange(np.prod(shape), dtype=np.int64)
    return (((i * 7) % 11 - 5) / np.float32(4)).astype(np.float32).reshape(shape)


def fixed_targets(n, classes):
    return (np.arange(n) * 5) % classes


def prefixed(prefix, module):
    return [(prefix + name, var) for name, var in module.named_parameters()]


def mlp_loop():
    rng = headlab.Rng(7)
    l1, norm, l2 = headlab.Linear(4, 8, rng=rng), headlab.LayerNorm(8), headlab.Linear(8, 3, rng=rng)
    params = prefixed("l1.", l1) + prefixed("norm.", norm) + prefixed("l2.", l2)
    x, targets = headlab.Var(fixed_inputs(6, 4)), fixed_targets(6, 3)
    optimizer = headlab.Adam(params, lr=0.05)
    losses = []
    for _ in range(5):
        loss = headlab.cross_entropy(l2(headlab.gelu(norm(l1(x)))), targets)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    return losses, params


def encoder_layer_loop():
    rng = headlab.Rng(3)
    layer = headlab.EncoderLayer(d_model=8, heads=2, d_ff=16, activation="gelu", rng=rng)
    head = headlab.Linear(8, 3, rng=rng)
    params = prefixed("layer.", layer) + prefixed("head.", head)
    x, targets = headlab.Var(fixed_inputs(2, 5, 8)), fixed_targets(10, 3)
    optimizer = headlab.AdamW(params, lr=0.01, weight_decay=0.01)
    schedule = headlab.Schedule.warmup_cosine(0.01, warmup_steps=2, total_steps=6)
    losses = []
    for _ in range(6):
        optimizer.lr = schedule.lr_at(optimizer.step_count + 1)
        loss = headlab.cross_entropy(head(layer(x)), targets)
        loss.backward()
        headlab.clip_grad_norm(optimizer.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    return losses, params


def as_bytes(losses, params):
    return np.array(losses, dtype=np.float32).tobytes() + b"".join(
        var.numpy().tobytes() for _, var in params)


@pytest.mark.skipif(TWIN is None, reason="HEADLAB_TENSOR_LOOP_TWIN is set by the CTest")
@pytest.mark.parametrize("name, loop", [("mlp", mlp_loop), ("encoder_layer", encoder_layer_loop)])
def test_python_loop_equals_the_cpp_loop_bit_for_bit(tmp_path, name, loop):
    out = tmp_path / f"{name}.bin"
    subprocess.run([TWIN, name, str(out)], check=True)
    losses, params = loop()
    assert losses[-1] < losses[0]  # it trains
    python_bytes = as_bytes(losses, params)
    cpp_bytes = out.read_bytes()
    assert len(python_bytes) == len(cpp_bytes)
    assert python_bytes == cpp_bytes


def test_the_loop_is_deterministic_in_process():
    first, second = mlp_loop(), mlp_loop()
    assert as_bytes(*first) == as_bytes(*second)
