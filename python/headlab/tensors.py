"""Tensors and autograd for small experiments: headlab.Tensor (shares memory with NumPy), Var and
the ops, the layers, the optimizers and schedules (all compiled, in headlab._headlab), and the
no_grad context, which is pure Python over the C++ grad-mode guard.
"""

import contextlib

from . import _headlab
from ._headlab import (
    Adam, AdamW, Embedding, Encoder, EncoderLayer, EncoderOutput, FeedForward, LayerNorm, Linear, Module,
    MultiHeadAttention, Optimizer, Rng, SGD, Schedule, SequenceLayer, Tensor, Var,
    add, add_layer_norm, batched_matmul, clip_grad_norm, concat, cross_entropy, cumsum, div,
    dropout, einsum, embedding, exp, expand, from_numpy, gelu, gelu_tanh, grad_enabled, grad_norm,
    head_gate, layer, layer_norm, linear, log, log_softmax, logsumexp, make_optimizer,
    make_schedule, masked_fill, matmul, max, mean, merge_heads, mul, permute, pow,
    registered_optimizers, relu, reshape, scale, sigmoid, slice, softmax, softplus, split_heads,
    sqrt, sub, sum, tanh, transpose, where,
)


@contextlib.contextmanager
def no_grad():
    """Within the block, ops record nothing onto the tape (evaluation, manual updates)."""
    scope = _headlab._NoGradScope()
    scope.enter()
    try:
        yield
    finally:
        scope.exit()


__all__ = [name for name in dir() if not name.startswith("_") and name != "contextlib"]
