// The broadcasting ops (NumPy's rules, autograd/broadcast.h).
//   expand:      out = x repeated to a shape            dx = g summed over the repeats
//   masked_fill: out = mask ? value : x                 dx = mask ? 0 : g          (mask constant)
//   where:       out = mask ? a : b (each broadcast)    da = mask ? g : 0,  db = mask ? 0 : g,
//                                                       each summed over its repeats

#include <array>

#include "autograd/broadcast.h"
#include "autograd/grad.h"
#include "autograd/ops.h"
#include "autograd/ops_internal.h"
#include "autograd/tape.h"
#include "core/elementwise.h"
#include "core/error.h"

namespace headlab {
namespace {

// `shape` with leading 1s up to `rank`: NumPy aligns shapes from the back, so this is the same
// broadcast with one rank on both sides (what ew::masked_fill reads).
Shape with_leading_ones(const Shape& shape, int rank) {
  std::array<int64_t, Shape::kMaxRank> dims{};
  dims.fill(1);
  for (int i = 1; i <= shape.rank(); ++i) dims[static_cast<size_t>(rank - i)] = shape[-i];
  return Shape(dims.begin(), dims.begin() + rank);
}

// The mask viewed at `shape`'s rank, after checking that it broadcasts to `shape` without
// growing it.
Tensor mask_over(const char* op, const Tensor& mask, const Shape& shape, const char* what) {
  if (!mask.defined()) fail("{}: mask is undefined", op);
  bool ok = mask.rank() <= shape.rank();
  for (int i = 1; ok && i <= mask.rank(); ++i)
    ok = mask.shape()[-i] == shape[-i] || mask.shape()[-i] == 1;
  if (!ok)
    fail(
        "{}: mask shape {} does not broadcast to {} shape {} (dims aligned from the back; each "
        "equal or 1)",
        op, mask.shape().str(), what, shape.str());
  return mask.rank() == shape.rank() ? mask
                                     : mask.view(with_leading_ones(mask.shape(), shape.rank()), op);
}

}  // namespace

Var expand(const Var& x, const Shape& shape) {
  constexpr const char* kOp = "expand";
  detail::check_defined(kOp, x);
  const Shape& in = x.shape();
  if (shape.rank() < in.rank())
    fail("{}: shape {} cannot be expanded to {} (fewer dims: {} < {})", kOp, in.str(), shape.str(),
         shape.rank(), in.rank());
  for (int k = 0; k < shape.rank(); ++k) {
    const int i = k - (shape.rank() - in.rank());  // x's dim under output dim k, or < 0
    if (i >= 0 && shape[k] != in[i] && in[i] != 1)
      fail("{}: shape {} cannot be expanded to {} (dim {}: {} vs {}; a dim expands only from 1)",
           kOp, in.str(), shape.str(), k, in[i], shape[k]);
  }
  return shape == in ? x : detail::broadcast_to(kOp, x, shape);
}

Var masked_fill(const Var& x, const Tensor& mask, float value) {
  constexpr const char* kOp = "masked_fill";
  detail::check_defined(kOp, x);
  const Tensor m = mask_over(kOp, mask, x.shape(), "x");
  Var out = make_output(kOp, x.shape(), {&x});
  ew::masked_fill(x.value().data(), x.shape(), m.data(), m.shape(), value, out.value().data());
  // The mask is kept by handle: it must not change before backward.
  record(kOp, out, [x, m](const Tensor& g) {
    grad::add(x, [&](Tensor& dx) {
      ew::masked_fill(g.data(), x.shape(), m.data(), m.shape(), 0.0f, dx.data());
    });
  });
  return out;
}

Var where(const Tensor& mask, const Var& a, const Var& b) {
  constexpr const char* kOp = "where";
  detail::check_defined(kOp, a);
  detail::check_defined(kOp, b);
  if (!mask.defined()) fail("{}: mask is undefined", kOp);
  const Shape shape = detail::broadcast_shape(
      kOp, detail::broadcast_shape(kOp, mask.shape(), a.shape()), b.shape());
  const Var ea = a.shape() == shape ? a : detail::broadcast_to(kOp, a, shape);
  const Var eb = b.shape() == shape ? b : detail::broadcast_to(kOp, b, shape);
  const Tensor m = mask_over(kOp, mask, shape, "the output");
  Var out = make_output(kOp, shape, {&ea, &eb});
  ew::select(m.data(), m.shape(), ea.value().data(), eb.value().data(), shape, out.value().data());
  // The mask expanded to the output's shape as 1 (take a) and 0 (take b), kept for backward.
  const int64_t n = shape.numel();
  Tensor take_a;
  if (out.requires_grad()) {
    take_a = Tensor::zeros(shape);
    ew::masked_fill(take_a.data(), shape, m.data(), m.shape(), 1.0f, take_a.data());
  }

  // a and b may be the same Var: it then gets g from both branches, g in all.
  record(kOp, out, [ea, eb, take_a, n](const Tensor& g) {
    grad::add(ea, [&](Tensor& da) {
      for (int64_t i = 0; i < n; ++i) da[i] = take_a[i] != 0.0f ? g[i] : 0.0f;
    });
    grad::add(eb, [&](Tensor& db) {
      for (int64_t i = 0; i < n; ++i) db[i] = take_a[i] != 0.0f ? 0.0f : g[i];
    });
  });
  return out;
}

}  // namespace headlab
