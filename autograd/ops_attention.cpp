// self_attention: the fused multi-head self-attention over packed projections (see ops.h). The
// kernels (Kernels::attention_forward / attention_backward) work per head straight from the
// packed [B, T, 3, h, d] layout; forward saves P (and, with dropout, the multipliers and
// P' = P * multipliers) for backward in one pooled buffer, qkv itself is kept by handle.

#include "autograd/grad.h"
#include "autograd/ops.h"
#include "autograd/ops_internal.h"
#include "autograd/tape.h"
#include "core/elementwise.h"
#include "core/error.h"
#include "core/kernels/kernels.h"

namespace headlab {

Var self_attention(const Var& qkv, const AttentionOptions& o) {
  constexpr const char* kOp = "self_attention";
  detail::check_defined(kOp, qkv);
  if (o.heads <= 0) fail("{}: heads is {} but must be positive", kOp, o.heads);
  if (qkv.rank() != 3 || qkv.size(2) % (3 * o.heads) != 0)
    fail("{}: qkv shape {} must be [B, T, 3 * heads * head_dim] with heads = {}", kOp,
         qkv.shape().str(), o.heads);
  if (!(o.dropout >= 0.0f && o.dropout < 1.0f))
    fail("{}: dropout is {} but must be in [0, 1)", kOp, o.dropout);
  if (o.dropout > 0.0f && o.rng == nullptr) fail("{}: dropout {} needs an rng", kOp, o.dropout);
  const int64_t b = qkv.size(0), t = qkv.size(1), h = o.heads, d = qkv.size(2) / (3 * h);
  if (o.key_padding_mask)
    check_shape(kOp, "key_padding_mask", o.key_padding_mask->shape(), Shape{b, t});
  if (o.attn_mask) check_shape(kOp, "attn_mask", o.attn_mask->shape(), Shape{t, t});

  const bool drop = o.dropout > 0.0f;
  const int64_t ntt = b * h * t * t;
  // P, then with dropout the multipliers and P'.
  Tensor saved = Tensor::empty({ntt * (drop ? 3 : 1)});
  float* p = saved.data();
  float* mult = drop ? p + ntt : nullptr;
  float* p_drop = drop ? mult + ntt : nullptr;
  if (drop) ew::dropout_mask(*o.rng, o.dropout, mult, b, ntt);  // as dropout() on [B, h, T, T]

  AttentionDesc desc;
  desc.batch = b;
  desc.heads = h;
  desc.len = t;
  desc.dim = d;
  desc.scale = o.scale;
  desc.key_padding_mask = o.key_padding_mask ? o.key_padding_mask->data() : nullptr;
  desc.attn_mask = o.attn_mask ? o.attn_mask->data() : nullptr;
  desc.dropout_mask = mult;
  Var out = make_output(kOp, Shape{b, t, h * d}, {&qkv});
  kernels().attention_forward(desc, qkv.value().data(), p, p_drop, out.value().data());

  if (o.weights) {
    if (out.requires_grad())
      fail(
          "{}: weights are returned only where no gradient is recorded (NoGradGuard), but qkv "
          "requires grad",
          kOp);
    *o.weights = saved.slice(0, ntt).view({b, h, t, t}, kOp);
  }
  // The masks are not needed any more (P is 0 where they masked): only the shapes are kept.
  desc.key_padding_mask = desc.attn_mask = nullptr;
  record(kOp, out, [qkv, saved, desc, drop](const Tensor& g) {
    AttentionDesc d = desc;
    const int64_t ntt = d.batch * d.heads * d.len * d.len;
    const float* p = saved.data();
    d.dropout_mask = drop ? p + ntt : nullptr;
    const grad::Target dqkv = grad::target(qkv);
    kernels().attention_backward(d, qkv.value().data(), p, drop ? p + 2 * ntt : nullptr, g.data(),
                                 dqkv.data, dqkv.accumulate);
  });
  return out;
}

}  // namespace headlab
