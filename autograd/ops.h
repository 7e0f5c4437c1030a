#pragma once
// The differentiable ops. Each is a free function: it checks shapes (throwing headlab::Error
// that names the op and both shapes), runs the forward kernel, and, when grad mode is on and an
// input requires a gradient, records a backward closure written right below its forward.
// Shapes in comments: B batch, T query length, S key length, D model width, h heads, d head
// width, C classes, V vocabulary.

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string_view>

#include "autograd/var.h"
#include "core/rng.h"
#include "core/sample_rng.h"

namespace headlab {

// ---- linear algebra (ops_matmul.cpp) ----

// op(a) @ op(b). b is 2-D. Without trans_a, a may have leading dims that are flattened into
// rows: [.., M, K] @ [K, N] -> [.., M, N]. With trans_a, a must be 2-D.
Var matmul(const Var& a, const Var& b, bool trans_a = false, bool trans_b = false);
// Batched op(a) @ op(b) over equal leading dims: [.., M, K] @ [.., K, N] -> [.., M, N].
Var batched_matmul(const Var& a, const Var& b, bool trans_a = false, bool trans_b = false);

// ---- element-wise (ops_elementwise.cpp; rows of autograd/derivatives.inc, but dropout) ----
// Binary ops broadcast as NumPy does: dims aligned from the back, each pair equal or one of
// them 1 ([B, T, 1] over [B, T, D], [B, 1, S] with [T, 1]); else they throw naming both shapes.
// When b's shape is a suffix of a's (a bias row [D], positions [T, D] over [B, T, D]) b is read
// in place; otherwise both are first repeated to the joint shape. Gradients are summed over the
// repeats.

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
// The same with masks keyed by sample (core/sample_rng.h), what every layer of the library uses:
// x's leading dim is the sample (batch) dim, each row's mask comes from its own generator, so a
// sentence gets the same mask wherever it is computed (docs/distributed.md). Takes one site of rng
// per call in training (none otherwise).
Var dropout(const Var& x, float p, SampleRng& rng, bool training);

// ---- element-wise math (rows of autograd/derivatives.inc too) ----
// Plain loops over the values (no kernel backend of their own: they are not on the flagship
// model's hot path, so one implementation serves every backend). Inputs outside an op's domain
// are not checked: they give what the C library gives (log(0) = -inf, sqrt(-1) = NaN).

// 1 / (1 + e^-x), without overflow for large |x|.                 dx = g y (1 - y)
Var sigmoid(const Var& x);
Var tanh(const Var& x);  //                                         dx = g (1 - y^2)
Var exp(const Var& x);   //                                         dx = g y
Var log(const Var& x);   // natural log                             dx = g / x
Var sqrt(const Var& x);  //                                         dx = g / (2 y)
// x^p for a scalar p: any x for integer p, x > 0 for the others (else NaN). dx = g p x^(p-1);
// p = 0 gives ones and a zero gradient (also at x = 0).
Var pow(const Var& x, float p);
// GELU's tanh form, PyTorch's gelu(approximate="tanh"): 0.5 x (1 + tanh(c (x + 0.044715 x^3)))
// with c = sqrt(2 / pi). Within 1e-3 of the erf form (gelu).
Var gelu_tanh(const Var& x);
// log(1 + e^x), without overflow for large x (x + log1p(e^-x)).  dx = g sigmoid(x)
Var softplus(const Var& x);
// a / b, b broadcast over a as in add. Values of b near 0 give huge values and gradients.
//   da = g / b,   db = -sum over the repeats of g a / b^2
Var div(const Var& a, const Var& b);

// ---- reductions and shapes (ops_shape.cpp; over a dimension: ops_reduce.cpp) ----

Var sum(const Var& x);   // -> [1]
Var mean(const Var& x);  // -> [1]
// Over dimension `dim` (negative counts from the back): [.., n, ..] -> [.., 1, ..] with keepdim,
// else without that dimension (a 1-d input gives [1]). Throws for a dim outside the rank. max
// needs n >= 1; on ties its gradient goes to the first maximal element (the lowest index along
// dim), as PyTorch's max(dim) indices, and a NaN is the maximum of any slice holding one.
Var sum(const Var& x, int dim, bool keepdim = false);
Var mean(const Var& x, int dim, bool keepdim = false);
Var max(const Var& x, int dim, bool keepdim = false);
// log(sum(exp(x))) over `dim`, shaped as sum(x, dim, keepdim): computed as m + log(sum(e^(x-m)))
// with m the slice's maximum, so large inputs do not overflow; a slice of -inf gives -inf.
// dx = g softmax(x) along dim (0 for a slice of -inf).
Var logsumexp(const Var& x, int dim, bool keepdim = false);
// Running sums along `dim` (same shape): y[.., k, ..] = sum_{j <= k} x[.., j, ..]. Sums in
// double. dx[k] = sum_{j >= k} g[j] (the reversed running sum of g).
Var cumsum(const Var& x, int dim);
// Same elements, new shape (same numel, else throws). The result is a view: it shares x's
// storage.
Var reshape(const Var& x, const Shape& shape);
// Swaps the last two dims (copies): [.., M, N] -> [.., N, M].
Var transpose(const Var& x);
// Reorders the dims (copies): output dim i is input dim dims[i]; dims is a permutation of
// 0 .. rank-1 (negative entries count from the back), else throws naming the op, the dims and
// the shape. [B, T, h, d] with {0, 2, 1, 3} -> [B, h, T, d]. Backward applies the inverse
// permutation to g.
Var permute(const Var& x, std::span<const int> dims);
inline Var permute(const Var& x, std::initializer_list<int> dims) {
  return permute(x, std::span<const int>(dims.begin(), dims.size()));
}
// Joins 1 to kMaxConcat inputs along `dim` (negative counts from the back); every other dim
// must agree: [.., n_i, ..] -> [.., sum n_i, ..]. Backward hands each input its block of g.
inline constexpr size_t kMaxConcat = 8;
Var concat(std::span<const Var> xs, int dim);
inline Var concat(std::initializer_list<Var> xs, int dim) {
  return concat(std::span<const Var>(xs.begin(), xs.size()), dim);
}
// Elements [begin, end) along `dim` (PyTorch's narrow): 0 <= begin <= end <= size(dim), else
// throws. Copies; backward adds g into that block of x's gradient.
Var slice(const Var& x, int dim, int64_t begin, int64_t end);
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
Var cross_entropy(const Var& logits, std::span<const int32_t> targets, int32_t ignore_index = -100);
// LayerNorm over the last dim with optional affine gain and bias ([D] each; pass undefined Vars
// for none). Biased variance, as the paper and PyTorch.
Var layer_norm(const Var& x, const Var& gain, const Var& bias, float eps = 1e-5f);

// ---- indexing and gates (ops_index.cpp) ----

// Rows of weight [V, D] gathered by ids (shape ids_shape) -> [ids_shape.., D]. Ids must lie in
// [0, V) (else throws naming the id and its position). Backward scatter-adds into weight; the
// ids are copied for it, so the span need not outlive the call.
Var embedding(const Var& weight, std::span<const int32_t> ids, const Shape& ids_shape);
// Per-head gate: x [B, h, T, d] * gate[h] ([h]); ablation (gate 0) and importance (dL/dgate).
Var head_gate(const Var& x, const Var& gate);
// head_gate on the merged layout: x [B, T, h d] (heads side by side, as self_attention returns
// it), gate [h]; equals merge_heads(head_gate(split_heads(x, h), gate)).
Var head_gate_merged(const Var& x, const Var& gate);

// ---- broadcasting (ops_broadcast.cpp): NumPy's rules, as in add ----

// x repeated to `shape` (PyTorch's expand, but a copy): dims aligned from the back, each of x's
// equal to the target's or 1, new leading dims allowed (no -1: a Shape holds sizes). [B, T, 1] to
// {B, T, D}, [D] to {B, T, D}. Else throws naming the op, both shapes and the dim. Returns x
// itself when the shape is already x's. dx = g summed over the repeats.
Var expand(const Var& x, const Shape& shape);
// Where mask != 0, the output is `value` (typically -inf) and the gradient is 0. mask
// broadcasts to x's shape without growing it: e.g. [B, 1, 1, S], [1, 1, T, S] or [S] over
// attention scores [B, h, T, S]. The mask is kept by handle for backward: do not change it
// before backward.
Var masked_fill(const Var& x, const Tensor& mask, float value);
// Element-wise choice: a where mask != 0, else b. mask, a and b broadcast together (each may
// have fewer dims or size-1 dims); the output has the joint shape. The gradient goes to the
// input chosen, summed over its repeats: da = g where mask, db = g elsewhere. The mask is read
// during the call only.
Var where(const Tensor& mask, const Var& a, const Var& b);

// ---- einsum (ops_einsum.cpp) ----

// Two-operand Einstein summation, "bhtd,bhsd->bhts", "ij,jk->ik", "ij,ij->" (a [1] result, as
// sum), "bij,bjk->bki" (the output in any order). Letters a-z and A-Z; each appears at most once
// per operand and in the output, and every output letter in an operand. A letter in both
// operands but not the output is summed (contracted), in one operand only and not the output
// summed over first; shared letters must have equal sizes (no broadcasting of size 1). Without
// "->" the output is the letters seen once, in alphabetical order (NumPy's rule). Bad equations
// and size mismatches throw one line naming einsum, the equation and the problem. Built from
// sum, permute, reshape and batched_matmul, whose backwards give the gradient.
Var einsum(std::string_view equation, const Var& a, const Var& b);

// ---- fused (ops_fused.cpp): one kernel pass and one tape entry where composed ops take
// several; each equals the composition named beside it (tests compare the two).

// y = x W^T + b, then max(0, .) when relu: x [.., in], weight [out, in], bias [out] or undefined
// -> [.., out]. Equals add(matmul(x, weight, false, true), bias), then relu. The bias and the
// ReLU run in the GEMM's epilogue; backward sums the bias gradient in the ReLU mask's pass.
Var linear(const Var& x, const Var& weight, const Var& bias, bool relu = false);
// LayerNorm(x + r) over the last dim, the post-norm residual: x, r [.., D], gain and bias [D] or
// undefined. Equals layer_norm(add(x, r), gain, bias, eps).
Var add_layer_norm(const Var& x, const Var& r, const Var& gain, const Var& bias, float eps = 1e-5f);

// Multi-head self-attention over packed projections (ops_attention.cpp), the fast path of
// MultiHeadAttention: qkv [B, T, 3 h d] holds Q, K and V side by side (as linear of x with its
// in_proj_weight gives), head i in columns [i d, (i + 1) d) of each third. With
// A_i = softmax(scale Q_i K_i^T + masks) [B, h, T, T] and dropout on A_i's entries:
//   out = Concat_i(dropout(A_i) V_i)      [B, T, h d]
// Equals split_heads of each third, scale(batched_matmul(q, k, false, true), scale), masked_fill
// with -inf for each mask, softmax, dropout(., p, rng) (the same keyed mask) and
// batched_matmul(., v), then merge_heads. Masks as in MultiHeadAttention (nonzero = masked):
// key_padding_mask [B, T], attn_mask [T, T]; they are read during the call only. With `weights`,
// it receives A [B, h, T, T] (before dropout), the kernel's own copy: a constant, so only where
// the op records nothing (no gradient mode, or nothing requires grad); elsewhere the composed ops
// give differentiable weights.
struct AttentionOptions {
  int64_t heads = 1;
  float scale = 1.0f;
  const Tensor* key_padding_mask = nullptr;
  const Tensor* attn_mask = nullptr;
  float dropout = 0.0f;      // in [0, 1); 0 outside training
  SampleRng* rng = nullptr;  // dropout masks, keyed by batch row; required when dropout > 0
  Tensor* weights = nullptr;
};
Var self_attention(const Var& qkv, const AttentionOptions& options);

}  // namespace headlab
