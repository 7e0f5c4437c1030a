// Reductions and shape ops. sum and mean spread their scalar gradient over every element
// (times 1/n for mean); reshape passes the gradient through unchanged; transpose, split_heads
// and merge_heads are permutations, so their backward is the inverse permutation of g.

#include "autograd/grad.h"
#include "autograd/ops.h"
#include "autograd/ops_internal.h"
#include "autograd/tape.h"
#include "core/elementwise.h"
#include "core/error.h"

namespace headlab {

Var sum(const Var& x) {
  constexpr const char* kOp = "sum";
  detail::check_defined(kOp, x);
  Var out = make_output(kOp, Shape{1}, {&x});
  out.value()[0] = static_cast<float>(ew::sum(x.value().data(), x.numel()));
  record(kOp, out, [x](const Tensor& g) {
    const float g0 = g[0];
    grad::add(x, [g0](Tensor& dx) { dx.fill_(g0); });
  });
  return out;
}

Var mean(const Var& x) {
  constexpr const char* kOp = "mean";
  detail::check_defined(kOp, x);
  const int64_t n = x.numel();
  if (n == 0) fail("{}: input of shape {} has no elements", kOp, x.shape().str());
  Var out = make_output(kOp, Shape{1}, {&x});
  out.value()[0] = static_cast<float>(ew::sum(x.value().data(), n) / static_cast<double>(n));
  record(kOp, out, [x, n](const Tensor& g) {
    const float g0 = static_cast<float>(g[0] / static_cast<double>(n));
    grad::add(x, [g0](Tensor& dx) { dx.fill_(g0); });
  });
  return out;
}

Var reshape(const Var& x, const Shape& shape) {
  constexpr const char* kOp = "reshape";
  detail::check_defined(kOp, x);
  if (shape.numel() != x.numel())
    fail("{}: cannot reshape {} to {} (numel {} vs {})", kOp, x.shape().str(), shape.str(),
         x.numel(), shape.numel());
  Var out = make_output(kOp, shape, {&x});
  out.value() = x.value().view(shape, kOp);  // shares x's storage, as a view
  record(kOp, out, [x](const Tensor& g) { grad::add(x, g); });
  return out;
}

Var transpose(const Var& x) {
  constexpr const char* kOp = "transpose";
  detail::check_defined(kOp, x);
  if (x.rank() < 2)
    fail("{}: input must have at least 2 dims but has shape {}", kOp, x.shape().str());
  Shape shape = x.shape();
  const int64_t m = shape[-2];
  const int64_t n = shape[-1];
  int64_t batch = 1;
  for (int i = 0; i < shape.rank() - 2; ++i) batch *= shape[i];
  shape[-2] = n;
  shape[-1] = m;
  Var out = make_output(kOp, shape, {&x});
  ew::swap_middle_dims(x.value().data(), batch, m, n, 1, out.value().data());
  record(kOp, out, [x, batch, m, n](const Tensor& g) {
    grad::add(x, [&](Tensor& dx) { ew::swap_middle_dims(g.data(), batch, n, m, 1, dx.data()); });
  });
  return out;
}

Var split_heads(const Var& x, int64_t heads) {
  constexpr const char* kOp = "split_heads";
  detail::check_defined(kOp, x);
  if (x.rank() != 3) fail("{}: input must be [B, T, h*d] but has shape {}", kOp, x.shape().str());
  if (heads < 1 || x.size(2) % heads != 0)
    fail("{}: heads = {} does not divide the last dim of {}", kOp, heads, x.shape().str());
  const int64_t b = x.size(0), t = x.size(1), d = x.size(2) / heads;
  Var out = make_output(kOp, Shape{b, heads, t, d}, {&x});
  // [B, T, h, d] -> [B, h, T, d]
  ew::swap_middle_dims(x.value().data(), b, t, heads, d, out.value().data());
  record(kOp, out, [x, b, t, heads, d](const Tensor& g) {
    grad::add(x, [&](Tensor& dx) { ew::swap_middle_dims(g.data(), b, heads, t, d, dx.data()); });
  });
  return out;
}

Var merge_heads(const Var& x) {
  constexpr const char* kOp = "merge_heads";
  detail::check_defined(kOp, x);
  if (x.rank() != 4) fail("{}: input must be [B, h, T, d] but has shape {}", kOp, x.shape().str());
  const int64_t b = x.size(0), h = x.size(1), t = x.size(2), d = x.size(3);
  Var out = make_output(kOp, Shape{b, t, h * d}, {&x});
  // [B, h, T, d] -> [B, T, h, d]
  ew::swap_middle_dims(x.value().data(), b, h, t, d, out.value().data());
  record(kOp, out, [x, b, h, t, d](const Tensor& g) {
    grad::add(x, [&](Tensor& dx) { ew::swap_middle_dims(g.data(), b, t, h, d, dx.data()); });
  });
  return out;
}

}  // namespace headlab
