#pragma once
// The differentiable ops. Each is a free function: it checks shapes (throwing headlab::Error
// that names the op and both shapes), runs the forward kernel, and, when grad mode is on and an
// input requires a gradient, records a backward closure written right below its forward.
// Shapes in comments: B batch, T query length, S key length, D model width, h heads, d head
// width, C classes, V vocabulary.

#include <cstdint>
#include <span>

#include "autograd/var.h"
#include "core/rng.h"

namespace headlab {

// ---- linear algebra (ops_matmul.cpp) ----

// op(a) @ op(b). b is 2-D. Without trans_a, a may have leading dims that are flattened into
// rows: [.., M, K] @ [K, N] -> [.., M, N]. With trans_a, a must be 2-D.
Var matmul(const Var& a, const Var& b, bool trans_a = false, bool trans_b = false);
// Batched op(a) @ op(b) over equal leading dims: [.., M, K] @ [.., K, N] -> [.., M, N].
Var batched_matmul(const Var& a, const Var& b, bool trans_a = false, bool trans_b = false);

// ---- element-wise (ops_elementwise.cpp) ----
// Binary ops broadcast b over a when b's shape is a suffix of a's (a bias row [D] over
// [B, T, D], positions [T, D] over [B, T, D]); otherwise shapes must be equal.

Var add(const Var& a, const Var& b);
Var sub(const Var& a, const Var& b);
Var mul(const Var& a, const Var& b);
Var scale(const Var& a, float s);
Var relu(const Var& x);
// Exact (erf) GELU, PyTorch's default.
Var gelu(const Var& x);
// Inverted dropout: in training, zeroes each element with probability p (mask drawn from rng,
// one uniform() per element: dropped when < p, whether or not grad mode is on) and scales the
// rest by 1/(1-p). When !training or p == 0 it returns x itself and draws nothing. Throws
// unless p is in [0, 1).
Var dropout(const Var& x, float p, Rng& rng, bool training);

// ---- reductions and shapes (ops_shape.cpp) ----

Var sum(const Var& x);   // -> [1]
Var mean(const Var& x);  // -> [1]
// Same elements, new shape (same numel, else throws). The result is a view: it shares x's
// storage.
Var reshape(const Var& x, const Shape& shape);
// Swaps the last two dims (copies): [.., M, N] -> [.., N, M].
Var transpose(const Var& x);
// [B, T, h*d] -> [B, h, T, d].
Var split_heads(const Var& x, int64_t heads);
// [B, h, T, d] -> [B, T, h*d].
Var merge_heads(const Var& x);

// ---- normalisation and probabilities (ops_nn.cpp) ----

// Softmax / log-softmax over the last dim. -inf entries get weight 0; a fully masked row
// gives zeros (softmax) and never NaN.
Var softmax(const Var& x);
Var log_softmax(const Var& x);
// Mean cross-entropy of logits [.., C] against integer targets (one per row), skipping rows
// whose target is ignore_index; the mean is over counted rows (0 if none). -> [1]. Targets
// must lie in [0, C) or equal ignore_index (else throws); they are not kept after the call.
Var cross_entropy(const Var& logits, std::span<const int32_t> targets,
                  int32_t ignore_index = -100);
// LayerNorm over the last dim with optional affine gain and bias ([D] each; pass undefined Vars
// for none). Biased variance, as the paper and PyTorch.
Var layer_norm(const Var& x, const Var& gain, const Var& bias, float eps = 1e-5f);

// ---- indexing and masking (ops_index.cpp) ----

// Rows of weight [V, D] gathered by ids (shape ids_shape) -> [ids_shape.., D]. Ids must lie in
// [0, V) (else throws naming the id and its position). Backward scatter-adds into weight; the
// ids are copied for it, so the span need not outlive the call.
Var embedding(const Var& weight, std::span<const int32_t> ids, const Shape& ids_shape);
// Where mask != 0, the output is `value` (typically -inf) and the gradient is 0. mask has x's
// rank; each of its dims equals x's or is 1 (broadcast): e.g. [B, 1, 1, S] or [1, 1, T, S]
// over attention scores [B, h, T, S]. The mask is kept by handle for backward: do not change
// it before backward.
Var masked_fill(const Var& x, const Tensor& mask, float value);
// Per-head gate: x [B, h, T, d] * gate[h] ([h]); ablation (gate 0) and importance (dL/dgate).
Var head_gate(const Var& x, const Var& gate);

}  // namespace headlab
