// Element-wise ops. For out = a (+|-|*) b with b broadcast as a suffix of a (b repeats every
// nb elements, rows = numel(a) / nb times):
//   add/sub: da = g,      db = +-sum over the repeats of g        (a column sum of g [rows, nb])
//   mul:     da = g * b,  db = sum over the repeats of g * a
// Unary ops take their derivative from the kernels (relu, gelu) or are linear (scale, dropout).

#include "autograd/ops.h"
#include "autograd/ops_internal.h"
#include "autograd/tape.h"
#include "core/elementwise.h"
#include "core/error.h"
#include "core/kernels/kernels.h"

namespace headlab {
namespace {

// b's shape must equal a's or be a suffix of it (b broadcast over a's leading dims).
void check_broadcast(const char* op, const Var& a, const Var& b) {
  const Shape& sa = a.shape();
  const Shape& sb = b.shape();
  bool ok = sb.rank() <= sa.rank();
  for (int i = 1; ok && i <= sb.rank(); ++i) ok = sa[-i] == sb[-i];
  if (!ok)
    fail("{}: b shape {} must equal a shape {} or be a suffix of it (broadcast over leading dims)",
         op, sb.str(), sa.str());
}

// add (alpha = 1) and sub (alpha = -1).
Var add_scaled(const char* op, const Var& a, const Var& b, float alpha) {
  detail::check_defined(op, a);
  detail::check_defined(op, b);
  check_broadcast(op, a, b);
  const int64_t n = a.numel();
  const int64_t nb = b.numel();
  Var out = make_output(op, a.shape(), {&a, &b});
  ew::add_broadcast(a.value().data(), n, b.value().data(), nb, alpha, out.value().data());

  record(op, out, [a, b, alpha, n, nb](const Tensor& g) {
    if (a.requires_grad()) detail::add_into_grad(a, g);
    if (b.requires_grad()) {
      if (nb == n) {
        detail::add_into_grad(b, g, alpha);
      } else {  // b was repeated n / nb times: its gradient sums g over the repeats
        const int64_t rows = nb == 0 ? 0 : n / nb;
        accumulate_grad(b,
                        [&](Tensor& dst) { ew::sum_rows(g.data(), rows, nb, alpha, dst.data()); });
      }
    }
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
  detail::check_defined("mul", a);
  detail::check_defined("mul", b);
  check_broadcast("mul", a, b);
  const int64_t n = a.numel();
  const int64_t nb = b.numel();
  Var out = make_output("mul", a.shape(), {&a, &b});
  ew::mul_broadcast(a.value().data(), n, b.value().data(), nb, out.value().data());

  record("mul", out, [a, b, n, nb](const Tensor& g) {
    // a and b may be the same Var (x * x): each branch adds its own term, giving 2 x g.
    if (a.requires_grad())
      accumulate_grad(a, [&](Tensor& dst) {
        ew::mul_broadcast(g.data(), n, b.value().data(), nb, dst.data());
      });
    if (b.requires_grad())
      accumulate_grad(b, [&](Tensor& dst) {
        if (nb == n)
          ew::mul_broadcast(g.data(), n, a.value().data(), n, dst.data());
        else
          ew::sum_rows_product(g.data(), a.value().data(), nb == 0 ? 0 : n / nb, nb, dst.data());
      });
  });
  return out;
}

Var scale(const Var& a, float s) {
  Var out = make_output("scale", a.shape(), {&a});
  ew::scale(a.value().data(), a.numel(), s, out.value().data());
  record("scale", out, [a, s](const Tensor& g) { detail::add_into_grad(a, g, s); });
  return out;
}

Var relu(const Var& x) {
  detail::check_defined("relu", x);
  Var out = make_output("relu", x.shape(), {&x});
  const int64_t n = x.numel();
  kernels().relu_forward(x.value().data(), out.value().data(), n);
  record("relu", out, [x, n](const Tensor& g) {
    accumulate_grad(x, [&](Tensor& dst) {
      kernels().relu_backward(x.value().data(), g.data(), dst.data(), n);
    });
  });
  return out;
}

Var gelu(const Var& x) {
  detail::check_defined("gelu", x);
  Var out = make_output("gelu", x.shape(), {&x});
  const int64_t n = x.numel();
  kernels().gelu_forward(x.value().data(), out.value().data(), n);
  record("gelu", out, [x, n](const Tensor& g) {
    accumulate_grad(x, [&](Tensor& dst) {
      kernels().gelu_backward(x.value().data(), g.data(), dst.data(), n);
    });
  });
  return out;
}

Var dropout(const Var& x, float p, Rng& rng, bool training) {
  if (!(p >= 0.0f && p < 1.0f)) fail("dropout: p is {} but must be in [0, 1)", p);
  detail::check_defined("dropout", x);
  if (!training || p == 0.0f) return x;
  // out = x * mask with mask in {0, 1/(1-p)}, so dx = g * mask: the scaled mask is all backward
  // needs. It is drawn whether or not the op is recorded, so the RNG stream does not depend on
  // grad mode.
  const int64_t n = x.numel();
  Tensor mask = Tensor::empty(x.shape());
  ew::dropout_mask(rng, p, mask.data(), n);
  Var out = make_output("dropout", x.shape(), {&x});
  ew::mul_broadcast(x.value().data(), n, mask.data(), n, out.value().data());
  record("dropout", out, [x, mask, n](const Tensor& g) {
    accumulate_grad(
        x, [&](Tensor& dst) { ew::mul_broadcast(g.data(), n, mask.data(), n, dst.data()); });
  });
  return out;
}

}  // namespace headlab
