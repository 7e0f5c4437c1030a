// Reductions over one dimension. With x viewed as [outer, n, inner] around dim d, the output is
// [outer, inner] (shaped [.., 1, ..] with keepdim, else without d):
//   sum:  y[o, i] = sum_k x[o, k, i]          dx[o, k, i] = g[o, i]
//   mean: y = sum / n                         dx = g / n
//   max:  y[o, i] = x[o, k*, i]               dx[o, k, i] = g[o, i] if k = k*, else 0
// where k* is the first index of the maximum (a NaN counts as the maximum).

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

#include "autograd/grad.h"
#include "autograd/ops.h"
#include "autograd/ops_internal.h"
#include "autograd/tape.h"
#include "core/elementwise.h"
#include "core/error.h"

namespace headlab {
namespace {

Shape reduced_shape(const Shape& shape, int d, bool keepdim) {
  Shape out;
  for (int i = 0; i < shape.rank(); ++i) {
    if (i != d)
      out.push_back(shape[i]);
    else if (keepdim)
      out.push_back(1);
  }
  if (out.rank() == 0) out.push_back(1);  // a 1-d input reduces to [1], the house's scalar
  return out;
}

// sum (scale 1) and mean (scale 1/n).
Var sum_over(const char* op, const Var& x, int dim, bool keepdim, bool average) {
  detail::check_defined(op, x);
  const int d = detail::normalize_dim(op, dim, x.shape());
  const detail::AroundDim a = detail::around_dim(x.shape(), d);
  if (average && a.n == 0) fail("{}: dim {} of shape {} is empty", op, dim, x.shape().str());
  const float scale = average ? 1.0f / static_cast<float>(a.n) : 1.0f;
  Var out = make_output(op, reduced_shape(x.shape(), d, keepdim), {&x});
  const float* xv = x.value().data();
  float* yv = out.value().data();
  for (int64_t o = 0; o < a.outer; ++o)  // x[o] is [n, inner]: its column sums
    ew::sum_rows(xv + o * a.n * a.inner, a.n, a.inner, scale, yv + o * a.inner);

  record(op, out, [x, a, scale](const Tensor& g) {
    grad::add(x, [&](Tensor& dx) {
      for (int64_t o = 0; o < a.outer; ++o)
        for (int64_t k = 0; k < a.n; ++k)
          ew::scale(g.data() + o * a.inner, a.inner, scale, dx.data() + (o * a.n + k) * a.inner);
    });
  });
  return out;
}

}  // namespace

Var sum(const Var& x, int dim, bool keepdim) {
  return sum_over("sum", x, dim, keepdim, false);
}

Var mean(const Var& x, int dim, bool keepdim) {
  return sum_over("mean", x, dim, keepdim, true);
}

Var max(const Var& x, int dim, bool keepdim) {
  constexpr const char* kOp = "max";
  detail::check_defined(kOp, x);
  const int d = detail::normalize_dim(kOp, dim, x.shape());
  const detail::AroundDim a = detail::around_dim(x.shape(), d);
  if (a.n == 0) fail("{}: dim {} of shape {} is empty", kOp, dim, x.shape().str());
  Var out = make_output(kOp, reduced_shape(x.shape(), d, keepdim), {&x});
  if (a.n > INT32_MAX) fail("{}: dim {} of shape {} is too long", kOp, dim, x.shape().str());
  // The winning k of every output element, kept for backward in a pooled buffer (int32 bits).
  Tensor winner = Tensor::empty(Shape{a.outer * a.inner});
  const float* xv = x.value().data();
  float* yv = out.value().data();
  for (int64_t o = 0; o < a.outer; ++o)
    for (int64_t i = 0; i < a.inner; ++i) {
      const float* column = xv + o * a.n * a.inner + i;
      int64_t best = 0;
      for (int64_t k = 1; k < a.n && !std::isnan(column[best * a.inner]); ++k)
        if (column[k * a.inner] > column[best * a.inner] || std::isnan(column[k * a.inner]))
          best = k;
      yv[o * a.inner + i] = column[best * a.inner];
      winner[o * a.inner + i] = std::bit_cast<float>(static_cast<int32_t>(best));
    }

  record(kOp, out, [x, a, winner](const Tensor& g) {
    grad::add(x, [&](Tensor& dx) {
      dx.zero_();
      for (int64_t o = 0; o < a.outer; ++o)
        for (int64_t i = 0; i < a.inner; ++i) {
          const int64_t k = std::bit_cast<int32_t>(winner[o * a.inner + i]);
          dx[(o * a.n + k) * a.inner + i] = g[o * a.inner + i];
        }
    });
  });
  return out;
}

Var logsumexp(const Var& x, int dim, bool keepdim) {
  constexpr const char* kOp = "logsumexp";
  detail::check_defined(kOp, x);
  const int d = detail::normalize_dim(kOp, dim, x.shape());
  const detail::AroundDim a = detail::around_dim(x.shape(), d);
  if (a.n == 0) fail("{}: dim {} of shape {} is empty", kOp, dim, x.shape().str());
  Var out = make_output(kOp, reduced_shape(x.shape(), d, keepdim), {&x});
  const float* xv = x.value().data();
  float* yv = out.value().data();
  for (int64_t o = 0; o < a.outer; ++o)
    for (int64_t i = 0; i < a.inner; ++i) {
      const float* column = xv + o * a.n * a.inner + i;
      float m = column[0];
      for (int64_t k = 1; k < a.n; ++k) m = std::max(m, column[k * a.inner]);
      if (std::isinf(m)) {  // all -inf gives -inf; a +inf gives +inf
        yv[o * a.inner + i] = m;
        continue;
      }
      double s = 0.0;
      for (int64_t k = 0; k < a.n; ++k) s += std::exp(double(column[k * a.inner]) - m);
      yv[o * a.inner + i] = static_cast<float>(m + std::log(s));
    }

  // dx = g e^(x - y): softmax along dim, from the output itself.
  record(kOp, out, [x, y = out.value(), a](const Tensor& g) {
    grad::add(x, [&](Tensor& dx) {
      const float* xv = x.value().data();
      for (int64_t o = 0; o < a.outer; ++o)
        for (int64_t k = 0; k < a.n; ++k)
          for (int64_t i = 0; i < a.inner; ++i) {
            const int64_t j = (o * a.n + k) * a.inner + i;
            const float yo = y[o * a.inner + i];
            dx[j] = std::isinf(yo) && yo < 0 ? 0.0f : g[o * a.inner + i] * std::exp(xv[j] - yo);
          }
    });
  });
  return out;
}

namespace {

// Running sums of x [outer, n, inner] along n, forward (reverse false) or from the back.
void running_sum(const float* x, const detail::AroundDim& a, bool reverse, float* y) {
  for (int64_t o = 0; o < a.outer; ++o)
    for (int64_t i = 0; i < a.inner; ++i) {
      double s = 0.0;
      for (int64_t step = 0; step < a.n; ++step) {
        const int64_t k = reverse ? a.n - 1 - step : step;
        const int64_t j = (o * a.n + k) * a.inner + i;
        s += x[j];
        y[j] = static_cast<float>(s);
      }
    }
}

}  // namespace

Var cumsum(const Var& x, int dim) {
  constexpr const char* kOp = "cumsum";
  detail::check_defined(kOp, x);
  const int d = detail::normalize_dim(kOp, dim, x.shape());
  const detail::AroundDim a = detail::around_dim(x.shape(), d);
  Var out = make_output(kOp, x.shape(), {&x});
  running_sum(x.value().data(), a, false, out.value().data());
  record(kOp, out, [x, a](const Tensor& g) {
    grad::add(x, [&](Tensor& dx) { running_sum(g.data(), a, true, dx.data()); });
  });
  return out;
}

}  // namespace headlab
