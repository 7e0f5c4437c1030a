// The element-wise ops: the machinery behind the rows of autograd/derivatives.inc (apply, the
// loops a row's expressions become, the binary ops' forward and backward), the rows themselves,
// and dropout, whose mask makes it no row (it draws from an rng and keeps the mask for backward).

#include "autograd/derivatives.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "autograd/broadcast.h"
#include "autograd/grad.h"
#include "autograd/ops.h"
#include "autograd/ops_internal.h"
#include "autograd/tape.h"
#include "core/elementwise.h"
#include "core/error.h"
#include "core/kernels/kernels.h"

namespace headlab {
namespace {

// ---- unary rows: y[i] = f(x[i], p), dx[i] = g[i] f'(x[i], y[i], p) ----

// R is a row's scalar forward and derivative (the UNARY and PARAM_UNARY macros below).
template <class R>
void map_forward(const float* x, float* y, int64_t n, float p) {
  for (int64_t i = 0; i < n; ++i) y[i] = R::forward(x[i], p);
}
template <class R>
void map_backward(const float* x, const float* y, const float* g, float* dx, int64_t n, float p) {
  for (int64_t i = 0; i < n; ++i) dx[i] = g[i] * R::derivative(x[i], y[i], p);
}

// A kernel pair of the backend (relu, gelu): the backward kernel writes dx from x and g.
template <void (Kernels::*Forward)(const float*, float*, int64_t) const>
void kernel_forward(const float* x, float* y, int64_t n, float) {
  (kernels().*Forward)(x, y, n);
}
template <void (Kernels::*Backward)(const float*, const float*, float*, int64_t) const>
void kernel_backward(const float* x, const float*, const float* g, float* dx, int64_t n, float) {
  (kernels().*Backward)(x, g, dx, n);
}

void linear_forward(const float* x, float* y, int64_t n, float p) {
  ew::scale(x, n, p, y);
}

// 1 / (1 + e^-x) from e^-|x|, which never overflows.
float sigmoid_of(float x) {
  const float e = std::exp(-std::abs(x));
  return x >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e);
}

// GELU's tanh form: 0.5 x (1 + t), t = tanh(u), u = c (x + a x^3); its derivative
// 0.5 (1 + t) + 0.5 x (1 - t^2) c (1 + 3 a x^2).
constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluA = 0.044715f;
float gelu_tanh_of(float x) {
  return 0.5f * x * (1.0f + std::tanh(kGeluC * (x + kGeluA * x * x * x)));
}
float gelu_tanh_derivative(float x) {
  const float t = std::tanh(kGeluC * (x + kGeluA * x * x * x));
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * kGeluC * (1.0f + 3.0f * kGeluA * x * x);
}

// log(1 + e^x) as max(x, 0) + log1p(e^-|x|): e^-|x| never overflows.
float softplus_of(float x) {
  return std::max(x, 0.0f) + std::log1p(std::exp(-std::abs(x)));
}

void finite_exponent(const char* op, float p) {
  if (!std::isfinite(p)) fail("{}: the exponent is {} but must be finite", op, p);
}

// ---- binary rows: b broadcast as a suffix of a (b repeats every nb elements, n / nb times) ----

// Column sums over the repeats of b when it was broadcast: rows = n / nb of g viewed [rows, nb].
int64_t repeats(const BinaryGrad& in) {
  return in.nb == 0 ? 0 : in.n / in.nb;
}

// out = a + alpha b (add: alpha = 1, sub: -1).  da = g,  db = alpha sum over the repeats of g.
// The sign is an int template parameter: clang 14 (the fuzz and sanitizer builds) has no float
// non-type template parameters.
template <int Sign>
void add_forward(const float* a, int64_t n, const float* b, int64_t nb, float* y) {
  ew::add_broadcast(a, n, b, nb, float(Sign), y);
}
template <int Sign>
void add_backward(const BinaryGrad& in) {
  grad::add(in.a, in.g);
  if (in.nb == in.n)
    grad::add(in.b, in.g, float(Sign));
  else
    grad::add(in.b, [&](Tensor& db) {
      ew::sum_rows(in.g.data(), repeats(in), in.nb, float(Sign), db.data());
    });
}

// out = a b.  da = g b,  db = sum over the repeats of g a. For mul(x, x) each term is added on
// its own, giving 2 x g.
void mul_forward(const float* a, int64_t n, const float* b, int64_t nb, float* y) {
  ew::mul_broadcast(a, n, b, nb, y);
}
void mul_backward(const BinaryGrad& in) {
  const float* g = in.g.data();
  grad::add(in.a,
            [&](Tensor& da) { ew::mul_broadcast(g, in.n, in.b.value().data(), in.nb, da.data()); });
  grad::add(in.b, [&](Tensor& db) {
    if (in.nb == in.n)
      ew::mul_broadcast(g, in.n, in.a.value().data(), in.n, db.data());
    else
      ew::sum_rows_product(g, in.a.value().data(), repeats(in), in.nb, db.data());
  });
}

// out = a / b.  da = g / b,  db = -sum over the repeats of g a / b^2 = -(sum of g y) / b. For
// div(x, x) the two terms cancel.
void div_forward(const float* a, int64_t n, const float* b, int64_t nb, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] / b[i % nb];
}
void div_backward(const BinaryGrad& in) {
  const float* g = in.g.data();
  const float* b = in.b.value().data();
  grad::add(in.a, [&](Tensor& da) {
    for (int64_t i = 0; i < in.n; ++i) da[i] = g[i] / b[i % in.nb];
  });
  grad::add(in.b, [&](Tensor& db) {
    ew::sum_rows_product(g, in.y.data(), repeats(in), in.nb, db.data());
    for (int64_t j = 0; j < in.nb; ++j) db[j] = -db[j] / b[j];
  });
}

}  // namespace

Var apply(const UnaryRule& rule, const Var& x, float p) {
  if (rule.check) rule.check(rule.name, p);
  detail::check_defined(rule.name, x);
  Var out = make_output(rule.name, x.shape(), {&x});
  const int64_t n = x.numel();
  rule.forward(x.value().data(), out.value().data(), n, p);
  if (!rule.backward) {  // linear: dx = p g, added without a temporary
    record(rule.name, out, [x, p](const Tensor& g) { grad::add(x, g, p); });
    return out;
  }
  record(rule.name, out, [x, y = out.value(), n, p, backward = rule.backward](const Tensor& g) {
    grad::add(x,
              [&](Tensor& dx) { backward(x.value().data(), y.data(), g.data(), dx.data(), n, p); });
  });
  return out;
}

namespace {

bool is_suffix(const Shape& a, const Shape& b) {
  bool ok = b.rank() <= a.rank();
  for (int i = 1; ok && i <= b.rank(); ++i) ok = a[-i] == b[-i];
  return ok;
}

}  // namespace

Var detail::broadcast_to(const char* op, const Var& x, const Shape& shape) {
  Var out = make_output(op, shape, {&x});
  const float* xv = x.value().data();
  float* yv = out.value().data();
  detail::for_broadcast(x.shape(), shape, [&](int64_t j, int64_t i) { yv[j] = xv[i]; });
  record(op, out, [x, shape](const Tensor& g) {
    grad::add(x, [&](Tensor& dx) {
      dx.zero_();
      detail::for_broadcast(x.shape(), shape, [&](int64_t j, int64_t i) { dx[i] += g[j]; });
    });
  });
  return out;
}

Var apply(const BinaryRule& rule, const Var& a, const Var& b) {
  detail::check_defined(rule.name, a);
  detail::check_defined(rule.name, b);
  if (!is_suffix(a.shape(), b.shape())) {  // full broadcasting: repeat both to the joint shape
    const Shape shape = detail::broadcast_shape(rule.name, a.shape(), b.shape());
    const Var ea = a.shape() == shape ? a : detail::broadcast_to(rule.name, a, shape);
    const Var eb = b.shape() == shape ? b : detail::broadcast_to(rule.name, b, shape);
    return apply(rule, ea, eb);
  }
  const int64_t n = a.numel();
  const int64_t nb = b.numel();
  Var out = make_output(rule.name, a.shape(), {&a, &b});
  rule.forward(a.value().data(), n, b.value().data(), nb, out.value().data());
  record(rule.name, out, [a, b, y = out.value(), n, nb, backward = rule.backward](const Tensor& g) {
    backward(BinaryGrad{a, b, y, g, n, nb});
  });
  return out;
}

// ---- the rows: first each row's loops, rule and public function (ops.h) ----

#define UNARY(op, f, df, ...)                                                              \
  namespace {                                                                              \
  struct op##_row {                                                                        \
    static float forward([[maybe_unused]] float x, float) { return f; }                    \
    static float derivative([[maybe_unused]] float x, [[maybe_unused]] float y, float) {   \
      return df;                                                                           \
    }                                                                                      \
  };                                                                                       \
  constexpr Draw op##_draws[] = {__VA_ARGS__};                                             \
  constexpr UnaryRule op##_rule{                                                           \
      #op, &map_forward<op##_row>, &map_backward<op##_row>, nullptr, nullptr, op##_draws}; \
  }                                                                                        \
  Var op(const Var& x) {                                                                   \
    return apply(op##_rule, x);                                                            \
  }

#define KERNEL_UNARY(op, forward, backward, ...)                      \
  namespace {                                                         \
  constexpr Draw op##_draws[] = {__VA_ARGS__};                        \
  constexpr UnaryRule op##_rule{#op,                                  \
                                &kernel_forward<&Kernels::forward>,   \
                                &kernel_backward<&Kernels::backward>, \
                                nullptr,                              \
                                nullptr,                              \
                                op##_draws};                          \
  }                                                                   \
  Var op(const Var& x) {                                              \
    return apply(op##_rule, x);                                       \
  }

#define PARAM_UNARY(op, param, check, f, df, ...)                                              \
  namespace {                                                                                  \
  struct op##_row {                                                                            \
    static float forward([[maybe_unused]] float x, [[maybe_unused]] float param) { return f; } \
    static float derivative([[maybe_unused]] float x, [[maybe_unused]] float y,                \
                            [[maybe_unused]] float param) {                                    \
      return df;                                                                               \
    }                                                                                          \
  };                                                                                           \
  constexpr Draw op##_draws[] = {__VA_ARGS__};                                                 \
  constexpr UnaryRule op##_rule{                                                               \
      #op, &map_forward<op##_row>, &map_backward<op##_row>, check, #param, op##_draws};        \
  }                                                                                            \
  Var op(const Var& x, float param) {                                                          \
    return apply(op##_rule, x, param);                                                         \
  }

#define LINEAR(op, param, ...)                                                               \
  namespace {                                                                                \
  constexpr Draw op##_draws[] = {__VA_ARGS__};                                               \
  constexpr UnaryRule op##_rule{#op, &linear_forward, nullptr, nullptr, #param, op##_draws}; \
  }                                                                                          \
  Var op(const Var& x, float param) {                                                        \
    return apply(op##_rule, x, param);                                                       \
  }

#define BINARY(op, forward, backward, a_domain, b_domain)                       \
  namespace {                                                                   \
  constexpr BinaryRule op##_rule{#op, &forward, &backward, a_domain, b_domain}; \
  }                                                                             \
  Var op(const Var& a, const Var& b) {                                          \
    return apply(op##_rule, a, b);                                              \
  }

#include "autograd/derivatives.inc"

#undef UNARY
#undef KERNEL_UNARY
#undef PARAM_UNARY
#undef LINEAR
#undef BINARY

// ---- then the lists of the rows ----

namespace {

#define UNARY(op, ...) &op##_rule,
#define KERNEL_UNARY(op, ...) &op##_rule,
#define PARAM_UNARY(op, ...) &op##_rule,
#define LINEAR(op, ...) &op##_rule,
#define BINARY(...)
constexpr const UnaryRule* kUnaryRules[] = {
#include "autograd/derivatives.inc"
};
#undef UNARY
#undef KERNEL_UNARY
#undef PARAM_UNARY
#undef LINEAR
#undef BINARY

#define UNARY(...)
#define KERNEL_UNARY(...)
#define PARAM_UNARY(...)
#define LINEAR(...)
#define BINARY(op, ...) &op##_rule,
constexpr const BinaryRule* kBinaryRules[] = {
#include "autograd/derivatives.inc"
};
#undef UNARY
#undef KERNEL_UNARY
#undef PARAM_UNARY
#undef LINEAR
#undef BINARY

}  // namespace

std::span<const UnaryRule* const> unary_rules() {
  return kUnaryRules;
}
std::span<const BinaryRule* const> binary_rules() {
  return kBinaryRules;
}

// ---- dropout ----

namespace {

// out = x * mask with mask in {0, 1/(1-p)}, so dx = g * mask: the scaled mask is all backward
// needs. It is drawn whether or not the op is recorded, so the RNG stream does not depend on
// grad mode. fill(mask, n) draws it.
template <class Fill>
Var dropout_op(const Var& x, float p, bool training, Fill fill) {
  constexpr const char* kOp = "dropout";
  if (!(p >= 0.0f && p < 1.0f)) fail("{}: p is {} but must be in [0, 1)", kOp, p);
  detail::check_defined(kOp, x);
  if (!training || p == 0.0f) return x;
  const int64_t n = x.numel();
  Tensor mask = Tensor::empty(x.shape());
  fill(mask.data(), n);
  Var out = make_output(kOp, x.shape(), {&x});
  ew::mul_broadcast(x.value().data(), n, mask.data(), n, out.value().data());
  record(kOp, out, [x, mask, n](const Tensor& g) {
    grad::add(x, [&](Tensor& dx) { ew::mul_broadcast(g.data(), n, mask.data(), n, dx.data()); });
  });
  return out;
}

}  // namespace

Var dropout(const Var& x, float p, Rng& rng, bool training) {
  return dropout_op(x, p, training,
                    [&](float* mask, int64_t n) { ew::dropout_mask(rng, p, mask, n); });
}

Var dropout(const Var& x, float p, SampleRng& rng, bool training) {
  return dropout_op(x, p, training, [&](float* mask, int64_t n) {
    const int64_t rows = x.rank() > 0 && x.size(0) > 0 ? x.size(0) : 1;
    ew::dropout_mask(rng, p, mask, rows, n);
  });
}

}  // namespace headlab
