// Element-wise math: y = f(x) with f' written from x and y (whichever is cheaper), and div.
// The loops live here rather than in core/kernels: these ops are building blocks for new layers
// (SwiGLU, ScaleNorm, ALiBi slopes), not the flagship model's hot path, so they need no fast
// variant beside a reference one, and every backend runs this one implementation.

#include <cmath>

#include "autograd/grad.h"
#include "autograd/ops.h"
#include "autograd/ops_internal.h"
#include "autograd/tape.h"
#include "core/elementwise.h"
#include "core/error.h"

namespace headlab {
namespace {

// y[i] = forward(x[i]); dx[i] = g[i] * derivative(x[i], y[i]). Both are stateless lambdas
// (or capture a scalar), so the backward closure stays small.
template <class Forward, class Derivative>
Var unary(const char* op, const Var& x, Forward forward, Derivative derivative) {
  detail::check_defined(op, x);
  Var out = make_output(op, x.shape(), {&x});
  const int64_t n = x.numel();
  const float* xv = x.value().data();
  float* yv = out.value().data();
  for (int64_t i = 0; i < n; ++i) yv[i] = forward(xv[i]);
  record(op, out, [x, out_value = out.value(), n, derivative](const Tensor& g) {
    grad::add(x, [&](Tensor& dx) {
      const float* xs = x.value().data();
      const float* ys = out_value.data();
      for (int64_t i = 0; i < n; ++i) dx[i] = g[i] * derivative(xs[i], ys[i]);
    });
  });
  return out;
}

}  // namespace

Var sigmoid(const Var& x) {
  return unary(
      "sigmoid", x,
      [](float v) {  // e^-|v| never overflows
        const float e = std::exp(-std::abs(v));
        return v >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e);
      },
      [](float, float y) { return y * (1.0f - y); });
}

Var tanh(const Var& x) {
  return unary(
      "tanh", x, [](float v) { return std::tanh(v); }, [](float, float y) { return 1.0f - y * y; });
}

Var exp(const Var& x) {
  return unary(
      "exp", x, [](float v) { return std::exp(v); }, [](float, float y) { return y; });
}

Var log(const Var& x) {
  return unary(
      "log", x, [](float v) { return std::log(v); }, [](float v, float) { return 1.0f / v; });
}

Var sqrt(const Var& x) {
  return unary(
      "sqrt", x, [](float v) { return std::sqrt(v); }, [](float, float y) { return 0.5f / y; });
}

Var pow(const Var& x, float p) {
  if (!std::isfinite(p)) fail("pow: the exponent is {} but must be finite", p);
  if (p == 0.0f)  // x^0 = 1 everywhere, and its derivative 0 (no 0 * inf at x = 0)
    return unary(
        "pow", x, [](float) { return 1.0f; }, [](float, float) { return 0.0f; });
  return unary(
      "pow", x, [p](float v) { return std::pow(v, p); },
      [p](float v, float) { return p * std::pow(v, p - 1.0f); });
}

Var div(const Var& a, const Var& b) {
  constexpr const char* kOp = "div";
  detail::check_defined(kOp, a);
  detail::check_defined(kOp, b);
  detail::check_broadcast(kOp, a, b);
  const int64_t n = a.numel();
  const int64_t nb = b.numel();
  Var out = make_output(kOp, a.shape(), {&a, &b});
  const float* av = a.value().data();
  const float* bv = b.value().data();
  float* yv = out.value().data();
  for (int64_t i = 0; i < n; ++i) yv[i] = av[i] / bv[i % nb];

  // a and b may be the same Var (x / x): each adds its own term, which cancel.
  record(kOp, out, [a, b, out_value = out.value(), n, nb](const Tensor& g) {
    const float* bs = b.value().data();
    grad::add(a, [&](Tensor& da) {
      for (int64_t i = 0; i < n; ++i) da[i] = g[i] / bs[i % nb];
    });
    grad::add(b, [&](Tensor& db) {  // -g a / b^2 = -(g y) / b, summed over b's repeats
      ew::sum_rows_product(g.data(), out_value.data(), nb == 0 ? 0 : n / nb, nb, db.data());
      for (int64_t j = 0; j < nb; ++j) db[j] = -db[j] / bs[j];
    });
  });
  return out;
}

}  // namespace headlab
