// Element-wise ops. For out = a (+|-|*) b with b broadcast as a suffix of a (b repeats every
// nb elements, rows = numel(a) / nb times):
//   add/sub: da = g,      db = +-sum over the repeats of g        (a column sum of g [rows, nb])
//   mul:     da = g * b,  db = sum over the repeats of g * a
// Unary ops take their derivative from the kernels (relu, gelu) or are linear (scale, dropout).

#include "autograd/grad.h"
#include "autograd/ops.h"
#include "autograd/ops_internal.h"
#include "autograd/tape.h"
#include "core/elementwise.h"
#include "core/error.h"
#include "core/kernels/kernels.h"

namespace headlab {
namespace {

// add (alpha = 1) and sub (alpha = -1).
Var add_scaled(const char* op, const Var& a, const Var& b, float alpha) {
  detail::check_defined(op, a);
  detail::check_defined(op, b);
  detail::check_broadcast(op, a, b);
  const int64_t n = a.numel();
  const int64_t nb = b.numel();
  Var out = make_output(op, a.shape(), {&a, &b});
  ew::add_broadcast(a.value().data(), n, b.value().data(), nb, alpha, out.value().data());

  record(op, out, [a, b, alpha, n, nb](const Tensor& g) {
    grad::add(a, g);
    if (nb == n) {
      grad::add(b, g, alpha);
    } else {  // b was repeated n / nb times: its gradient sums g over the repeats
      const int64_t rows = nb == 0 ? 0 : n / nb;
      grad::add(b, [&](Tensor& db) { ew::sum_rows(g.data(), rows, nb, alpha, db.data()); });
    }
  });
  return out;
}

// relu and gelu: y = f(x) by the kernels' forward, dx from x and g by their backward.
using EltwiseForward = void (Kernels::*)(const float* x, float* y, int64_t n) const;
using EltwiseBackward = void (Kernels::*)(const float* x, const float* dy, float* dx,
                                          int64_t n) const;

Var eltwise_op(const char* op, const Var& x, EltwiseForward forward, EltwiseBackward backward) {
  detail::check_defined(op, x);
  Var out = make_output(op, x.shape(), {&x});
  const int64_t n = x.numel();
  (kernels().*forward)(x.value().data(), out.value().data(), n);
  record(op, out, [x, n, backward](const Tensor& g) {
    grad::add(x,
              [&](Tensor& dx) { (kernels().*backward)(x.value().data(), g.data(), dx.data(), n); });
  });
  return out;
}

}  // namespace

Var add(const Var& a, const Var& b) {
  return add_scaled("add", a, b, 1.0f);
}
Var sub(const Var& a, const Var& b) {
  return add_scaled("sub", a, b, -1.0f);
}

Var mul(const Var& a, const Var& b) {
  constexpr const char* kOp = "mul";
  detail::check_defined(kOp, a);
  detail::check_defined(kOp, b);
  detail::check_broadcast(kOp, a, b);
  const int64_t n = a.numel();
  const int64_t nb = b.numel();
  Var out = make_output(kOp, a.shape(), {&a, &b});
  ew::mul_broadcast(a.value().data(), n, b.value().data(), nb, out.value().data());

  record(kOp, out, [a, b, n, nb](const Tensor& g) {
    // a and b may be the same Var (x * x): each adds its own term, giving 2 x g.
    grad::add(a,
              [&](Tensor& da) { ew::mul_broadcast(g.data(), n, b.value().data(), nb, da.data()); });
    grad::add(b, [&](Tensor& db) {
      if (nb == n)
        ew::mul_broadcast(g.data(), n, a.value().data(), n, db.data());
      else
        ew::sum_rows_product(g.data(), a.value().data(), nb == 0 ? 0 : n / nb, nb, db.data());
    });
  });
  return out;
}

Var scale(const Var& a, float s) {
  constexpr const char* kOp = "scale";
  detail::check_defined(kOp, a);
  Var out = make_output(kOp, a.shape(), {&a});
  ew::scale(a.value().data(), a.numel(), s, out.value().data());
  record(kOp, out, [a, s](const Tensor& g) { grad::add(a, g, s); });
  return out;
}

Var relu(const Var& x) {
  return eltwise_op("relu", x, &Kernels::relu_forward, &Kernels::relu_backward);
}

Var gelu(const Var& x) {
  return eltwise_op("gelu", x, &Kernels::gelu_forward, &Kernels::gelu_backward);
}

Var dropout(const Var& x, float p, Rng& rng, bool training) {
  constexpr const char* kOp = "dropout";
  if (!(p >= 0.0f && p < 1.0f)) fail("{}: p is {} but must be in [0, 1)", kOp, p);
  detail::check_defined(kOp, x);
  if (!training || p == 0.0f) return x;
  // out = x * mask with mask in {0, 1/(1-p)}, so dx = g * mask: the scaled mask is all backward
  // needs. It is drawn whether or not the op is recorded, so the RNG stream does not depend on
  // grad mode.
  const int64_t n = x.numel();
  Tensor mask = Tensor::empty(x.shape());
  ew::dropout_mask(rng, p, mask.data(), n);
  Var out = make_output(kOp, x.shape(), {&x});
  ew::mul_broadcast(x.value().data(), n, mask.data(), n, out.value().data());
  record(kOp, out, [x, mask, n](const Tensor& g) {
    grad::add(x, [&](Tensor& dx) { ew::mul_broadcast(g.data(), n, mask.data(), n, dx.data()); });
  });
  return out;
}

}  // namespace headlab
