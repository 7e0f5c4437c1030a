// Indexing and masking.
//   embedding:   out[i] = W[id_i]          dW[v] += sum over {i : id_i = v} of g[i]  (scatter-add)
//   masked_fill: out = mask ? value : x    dx = mask ? 0 : g                         (mask
//   constant) head_gate:   out[b,k] = x[b,k] gate[k] dx[b,k] = g[b,k] gate[k],
//                                          dgate[k] = sum over b, t, e of g[b,k,t,e] x[b,k,t,e]

#include "autograd/ops.h"
#include "autograd/ops_internal.h"
#include "autograd/tape.h"
#include "core/elementwise.h"
#include "core/error.h"

namespace headlab {

Var embedding(const Var& weight, std::span<const int32_t> ids, const Shape& ids_shape) {
  detail::check_defined("embedding", weight);
  if (weight.rank() != 2)
    fail("embedding: weight must be [V, D] but has shape {}", weight.shape().str());
  const int64_t n = static_cast<int64_t>(ids.size());
  if (n != ids_shape.numel())
    fail("embedding: {} ids given for ids shape {} (numel {})", n, ids_shape.str(),
         ids_shape.numel());
  if (ids_shape.rank() >= Shape::kMaxRank)
    fail("embedding: ids shape {} leaves no room for the embedding dim (max rank {})",
         ids_shape.str(), Shape::kMaxRank);
  const int64_t vocab = weight.size(0);
  const int64_t dim = weight.size(1);
  for (int64_t i = 0; i < n; ++i)
    if (ids[i] < 0 || ids[i] >= vocab)
      fail("embedding: id {} at position {} is outside [0, {})", ids[i], i, vocab);
  Shape shape = ids_shape;
  shape.push_back(dim);
  Var out = make_output("embedding", shape, {&weight});
  ew::gather_rows(weight.value().data(), dim, ids.data(), n, out.value().data());
  if (!out.requires_grad()) return out;

  // The caller's ids may be gone by backward: keep a copy, bit for bit, in a pooled buffer.
  Tensor id_bits = Tensor::empty(Shape{n});
  ew::store_ids(ids.data(), n, id_bits.data());
  record("embedding", out, [weight, id_bits, n, dim](const Tensor& g) {
    // Scatter-add accumulates by itself: zero a fresh gradient, then add into it either way.
    GradSlot slot = grad_slot(weight);
    if (slot.fresh) slot.grad.zero_();
    ew::scatter_add_rows(g.data(), dim, id_bits.data(), n, slot.grad.data());
  });
  return out;
}

Var masked_fill(const Var& x, const Tensor& mask, float value) {
  detail::check_defined("masked_fill", x);
  if (!mask.defined()) fail("masked_fill: mask is undefined");
  bool ok = mask.rank() == x.rank();
  for (int d = 0; ok && d < x.rank(); ++d) ok = mask.size(d) == x.size(d) || mask.size(d) == 1;
  if (!ok)
    fail(
        "masked_fill: mask shape {} does not broadcast over x shape {} (same rank; each dim "
        "equal or 1)",
        mask.shape().str(), x.shape().str());
  Var out = make_output("masked_fill", x.shape(), {&x});
  ew::masked_fill(x.value().data(), x.shape(), mask.data(), mask.shape(), value,
                  out.value().data());
  // The mask is kept by handle: it must not change before backward.
  record("masked_fill", out, [x, mask](const Tensor& g) {
    accumulate_grad(x, [&](Tensor& dst) {
      ew::masked_fill(g.data(), x.shape(), mask.data(), mask.shape(), 0.0f, dst.data());
    });
  });
  return out;
}

Var head_gate(const Var& x, const Var& gate) {
  detail::check_defined("head_gate", x);
  detail::check_defined("head_gate", gate);
  if (x.rank() != 4) fail("head_gate: x must be [B, h, T, d] but has shape {}", x.shape().str());
  if (gate.rank() != 1 || gate.size(0) != x.size(1))
    fail("head_gate: gate shape is {} but expected [{}] for x {}", gate.shape().str(), x.size(1),
         x.shape().str());
  const int64_t heads = x.size(1);
  const int64_t blocks = x.size(0) * heads;  // one [T, d] block per (b, k)
  const int64_t block = x.size(2) * x.size(3);
  Var out = make_output("head_gate", x.shape(), {&x, &gate});
  const float* gv = gate.value().data();
  for (int64_t i = 0; i < blocks; ++i)
    ew::scale(x.value().data() + i * block, block, gv[i % heads], out.value().data() + i * block);

  record("head_gate", out, [x, gate, heads, blocks, block](const Tensor& g) {
    if (x.requires_grad())
      accumulate_grad(x, [&](Tensor& dst) {
        const float* gv = gate.value().data();
        for (int64_t i = 0; i < blocks; ++i)
          ew::scale(g.data() + i * block, block, gv[i % heads], dst.data() + i * block);
      });
    if (gate.requires_grad())
      accumulate_grad(gate, [&](Tensor& dst) {
        dst.zero_();
        const float* xv = x.value().data();
        for (int64_t i = 0; i < blocks; ++i) {
          double dot = 0.0;
          for (int64_t j = 0; j < block; ++j)
            dot += static_cast<double>(g[i * block + j]) * xv[i * block + j];
          dst[i % heads] += static_cast<float>(dot);
        }
      });
  });
  return out;
}

}  // namespace headlab
