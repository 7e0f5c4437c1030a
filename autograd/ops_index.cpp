// Indexing and gates (masked_fill and where: ops_broadcast.cpp).
//   embedding:   out[i] = W[id_i]          dW[v] += sum over {i : id_i = v} of g[i]  (scatter-add)
//   head_gate:   out[b,k] = x[b,k] gate[k] dx[b,k] = g[b,k] gate[k],
//                                          dgate[k] = sum over b, t, e of g[b,k,t,e] x[b,k,t,e]
//   head_gate_merged: the same on the merged layout x [B, T, h d] (heads side by side)

#include "autograd/grad.h"
#include "autograd/ops.h"
#include "autograd/ops_internal.h"
#include "autograd/tape.h"
#include "core/elementwise.h"
#include "core/error.h"

namespace headlab {

Var embedding(const Var& weight, std::span<const int32_t> ids, const Shape& ids_shape) {
  constexpr const char* kOp = "embedding";
  detail::check_defined(kOp, weight);
  if (weight.rank() != 2)
    fail("{}: weight must be [V, D] but has shape {}", kOp, weight.shape().str());
  const int64_t n = static_cast<int64_t>(ids.size());
  if (n != ids_shape.numel())
    fail("{}: {} ids given for ids shape {} (numel {})", kOp, n, ids_shape.str(),
         ids_shape.numel());
  if (ids_shape.rank() >= Shape::kMaxRank)
    fail("{}: ids shape {} leaves no room for the embedding dim (max rank {})", kOp,
         ids_shape.str(), Shape::kMaxRank);
  const int64_t vocab = weight.size(0);
  const int64_t dim = weight.size(1);
  for (int64_t i = 0; i < n; ++i)
    if (ids[i] < 0 || ids[i] >= vocab)
      fail("{}: id {} at position {} is outside [0, {})", kOp, ids[i], i, vocab);
  Shape shape = ids_shape;
  shape.push_back(dim);
  Var out = make_output(kOp, shape, {&weight});
  ew::gather_rows(weight.value().data(), dim, ids.data(), n, out.value().data());
  if (!out.requires_grad()) {
    profile_event(ProfileEvent::forward_done, kOp);  // record() is not reached
    return out;
  }

  // The caller's ids may be gone by backward: keep a copy, bit for bit, in a pooled buffer.
  Tensor id_bits = Tensor::empty(Shape{n});
  ew::store_ids(ids.data(), n, id_bits.data());
  record(kOp, out, [weight, id_bits, n, dim](const Tensor& g) {
    // Scatter-add accumulates by itself: zero a fresh gradient, then add into it either way.
    const grad::Target dw = grad::target(weight);
    if (!dw.accumulate) std::fill_n(dw.data, weight.numel(), 0.0f);
    ew::scatter_add_rows(g.data(), dim, id_bits.data(), n, dw.data);
  });
  return out;
}

namespace {

// x as `blocks` contiguous blocks of `block` values, block i scaled by gate[i % heads]: both
// layouts of the heads are this (see head_gate and head_gate_merged).
Var gate_blocks(const char* op, const Var& x, const Var& gate, int64_t heads, int64_t blocks,
                int64_t block) {
  Var out = make_output(op, x.shape(), {&x, &gate});
  const float* gv = gate.value().data();
  for (int64_t i = 0; i < blocks; ++i)
    ew::scale(x.value().data() + i * block, block, gv[i % heads], out.value().data() + i * block);

  record(op, out, [x, gate, heads, blocks, block](const Tensor& g) {
    grad::add(x, [&](Tensor& dx) {
      const float* gv = gate.value().data();
      for (int64_t i = 0; i < blocks; ++i)
        ew::scale(g.data() + i * block, block, gv[i % heads], dx.data() + i * block);
    });
    grad::add(gate, [&](Tensor& dgate) {
      dgate.zero_();
      const float* xv = x.value().data();
      for (int64_t i = 0; i < blocks; ++i) {
        double dot = 0.0;
        for (int64_t j = 0; j < block; ++j)
          dot += static_cast<double>(g[i * block + j]) * xv[i * block + j];
        dgate[i % heads] += static_cast<float>(dot);
      }
    });
  });
  return out;
}

void check_gate(const char* op, const Var& x, const Var& gate) {
  detail::check_defined(op, x);
  detail::check_defined(op, gate);
  if (gate.rank() != 1) fail("{}: gate must be [heads] but has shape {}", op, gate.shape().str());
}

}  // namespace

Var head_gate(const Var& x, const Var& gate) {
  constexpr const char* kOp = "head_gate";
  check_gate(kOp, x, gate);
  if (x.rank() != 4) fail("{}: x must be [B, h, T, d] but has shape {}", kOp, x.shape().str());
  if (gate.size(0) != x.size(1))
    fail("{}: gate shape is {} but expected [{}] for x {}", kOp, gate.shape().str(), x.size(1),
         x.shape().str());
  const int64_t heads = x.size(1);
  return gate_blocks(kOp, x, gate, heads, x.size(0) * heads, x.size(2) * x.size(3));
}

Var head_gate_merged(const Var& x, const Var& gate) {
  constexpr const char* kOp = "head_gate_merged";
  check_gate(kOp, x, gate);
  const int64_t heads = gate.size(0);
  if (x.rank() != 3 || heads == 0 || x.size(2) % heads != 0)
    fail("{}: x must be [B, T, {} * d] but has shape {}", kOp, heads, x.shape().str());
  const int64_t d = x.size(2) / heads;
  return gate_blocks(kOp, x, gate, heads, x.size(0) * x.size(1) * heads, d);
}

}  // namespace headlab
