// self_attention: the fused multi-head self-attention over packed projections (see ops.h).
// Per head, with S = scale Q K^T + masks, P = softmax(S), P' = P * dropout multipliers and
// O = P' V:
//   dP' = dO V^T,  dV = P'^T dO,  dS = P * (dP - rowsum(P * dP)) with dP = dP' * multipliers,
//   dQ = scale dS K,  dK = scale dS^T Q.
// Q, K, V are copied once into head-major blocks ([3, B, h, T, d]) so every product is one
// batched GEMM over the B*h heads; the scale rides in the GEMMs' alpha. Saved for backward in one
// pooled buffer: the head-major Q, K, V, P and, with dropout, the multipliers and P'.

#include <cmath>

#include "autograd/ops.h"
#include "autograd/ops_internal.h"
#include "autograd/tape.h"
#include "core/elementwise.h"
#include "core/error.h"
#include "core/kernels.h"

namespace headlab {

Var self_attention(const Var& qkv, const AttentionOptions& o) {
  detail::check_defined("self_attention", qkv);
  if (o.heads <= 0) fail("self_attention: heads is {} but must be positive", o.heads);
  if (qkv.rank() != 3 || qkv.size(2) % (3 * o.heads) != 0)
    fail("self_attention: qkv shape {} must be [B, T, 3 * heads * head_dim] with heads = {}",
         qkv.shape().str(), o.heads);
  if (!(o.dropout >= 0.0f && o.dropout < 1.0f))
    fail("self_attention: dropout is {} but must be in [0, 1)", o.dropout);
  if (o.dropout > 0.0f && o.rng == nullptr)
    fail("self_attention: dropout {} needs an rng", o.dropout);
  const int64_t b = qkv.size(0), t = qkv.size(1), h = o.heads, d = qkv.size(2) / (3 * h);
  if (o.key_padding_mask)
    check_shape("self_attention", "key_padding_mask", o.key_padding_mask->shape(), Shape{b, t});
  if (o.attn_mask) check_shape("self_attention", "attn_mask", o.attn_mask->shape(), Shape{t, t});

  const bool drop = o.dropout > 0.0f;
  const int64_t nhd = b * h * t * d, ntt = b * h * t * t;
  Tensor saved = Tensor::empty({3 * nhd + ntt * (drop ? 3 : 1)});
  float* q = saved.data();
  float* k = q + nhd;
  float* v = k + nhd;
  float* p = v + nhd;
  float* mult = drop ? p + ntt : nullptr;
  float* p_drop = drop ? mult + ntt : nullptr;

  const Kernels& kern = kernels();
  kern.heads_split(qkv.value().data(), q, b, t, 3, h, d);
  kern.gemm({.trans_b = true, .m = t, .n = t, .k = d, .alpha = o.scale, .batch = b * h}, q, k, p);
  if (drop) ew::dropout_mask(*o.rng, o.dropout, mult, ntt);
  kern.attention_softmax_forward(p, p_drop, mult,
                                 o.key_padding_mask ? o.key_padding_mask->data() : nullptr,
                                 o.attn_mask ? o.attn_mask->data() : nullptr, b, h, t, t);
  Tensor heads = Tensor::empty({b * h * t * d});
  kern.gemm({.m = t, .n = d, .k = t, .batch = b * h}, drop ? p_drop : p, v, heads.data());
  Var out = make_output("self_attention", Shape{b, t, h * d}, {&qkv});
  kern.heads_merge(heads.data(), out.value().data(), false, b, t, 1, h, d);

  record("self_attention", out, [qkv, saved, b, t, h, d, drop, scale = o.scale](const Tensor& g) {
    const Kernels& kern = kernels();
    const int64_t nhd = b * h * t * d, ntt = b * h * t * t;
    const float* q = saved.data();
    const float* k = q + nhd;
    const float* v = k + nhd;
    const float* p = v + nhd;
    const float* mult = drop ? p + ntt : nullptr;
    const float* p_drop = drop ? mult + ntt : nullptr;
    // dO to head-major; dQ, dK, dV in the saved Q, K, V layout.
    Tensor work = Tensor::empty({4 * nhd + ntt});
    float* d_heads = work.data();
    float* dq = d_heads + nhd;
    float* dk = dq + nhd;
    float* dv = dk + nhd;
    float* dp = dv + nhd;
    kern.heads_split(g.data(), d_heads, b, t, 1, h, d);
    kern.gemm({.trans_b = true, .m = t, .n = t, .k = d, .batch = b * h}, d_heads, v, dp);
    kern.gemm({.trans_a = true, .m = t, .n = d, .k = t, .batch = b * h}, drop ? p_drop : p,
              d_heads, dv);
    kern.attention_softmax_backward(p, dp, mult, b * h * t, t);  // dp becomes dS
    kern.gemm({.m = t, .n = d, .k = t, .alpha = scale, .batch = b * h}, dp, k, dq);
    kern.gemm({.trans_a = true, .m = t, .n = d, .k = t, .alpha = scale, .batch = b * h}, dp, q,
              dk);
    GradSlot slot = grad_slot(qkv);
    kern.heads_merge(dq, slot.grad.data(), !slot.fresh, b, t, 3, h, d);
  });
  return out;
}

}  // namespace headlab
