"""A trained model's hook points from Python: the helpers beside headlab.Model.

headlab.Model (compiled: python/model.cpp) loads a run's checkpoint and runs it with hook points
read (run_with_cache) or replaced by Python functions (run_with_hooks). The functions here are
the NumPy counterparts of layers/hooks.h's per-head edits and the evaluation over a run's own
evaluation batches, so an experiment reads as the analysis does it.
"""

import numpy as np

from ._headlab import Model, load_model


def zero_head(z, head):
    """z [B, T, heads, d] with head `head`'s slice 0 (zero ablation at hook_q/k/v/z)."""
    out = np.array(z, dtype=np.float32, copy=True)
    out[:, :, head, :] = 0.0
    return out


def patch_head(z, source, head):
    """z [B, T, heads, d] with head `head`'s slice taken from `source` (activation patching)."""
    out = np.array(z, dtype=np.float32, copy=True)
    out[:, :, head, :] = np.asarray(source, dtype=np.float32)[:, :, head, :]
    return out


def evaluate(model, hooks=None, batches=None):
    """Accuracy and component accuracies over the run's evaluation batches (all, or the indices in
    `batches`), each run with `hooks` ({point: fn}, or a function of the batch index giving
    them): token-weighted as `headlab eval` and heads.json count them."""
    indices = range(model.eval_batches) if batches is None else batches
    tokens = correct = 0
    relation_correct = {r: 0 for r in model.relations}
    for i in indices:
        batch = model.eval_batch(i)
        edits = hooks(i) if callable(hooks) else (hooks or {})
        result = model.run_with_hooks(batch, edits)
        counts = model.score(batch, result)
        tokens += counts["tokens"]
        correct += counts["correct"]
        for r in model.relations:
            relation_correct[r] += counts["relation_correct"][r]
    return {
        "tokens": tokens,
        "accuracy": correct / tokens if tokens else 0.0,
        "component_accuracy": {r: (c / tokens if tokens else 0.0)
                               for r, c in relation_correct.items()},
    }


__all__ = ["Model", "load_model", "zero_head", "patch_head", "evaluate"]
