#pragma once
// What the op gradcheck cases (op_checks*.cpp) share: small random leaves, the
// check with its options, and the list the cases are added to (internal to autograd).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "autograd/gradcheck.h"
#include "core/rng.h"

namespace headlab::op_checks {

inline constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// A leaf needing a gradient with N(shift, scale^2) entries.
inline Var leaf(Rng& rng, const Shape& shape, float scale = 1.0f, float shift = 0.0f) {
  Tensor t = Tensor::empty(shape);
  for (int64_t i = 0; i < t.numel(); ++i) t[i] = shift + scale * rng.normal();
  return Var(t, true);
}

// Entries at least `margin` away from 0 (for kinks at 0, such as relu's).
inline Var leaf_off_zero(Rng& rng, const Shape& shape, float margin) {
  Var v = leaf(rng, shape);
  float* x = v.value().data();
  for (int64_t i = 0; i < v.numel(); ++i) x[i] = std::copysign(margin + std::abs(x[i]), x[i]);
  return v;
}

// Entries in [lo, lo + 2 * spread): for ops defined on positive inputs (log, sqrt, pow with a
// non-integer exponent) and for denominators kept away from 0.
inline Var leaf_positive(Rng& rng, const Shape& shape, float lo, float spread = 1.0f) {
  Tensor t = Tensor::empty(shape);
  for (int64_t i = 0; i < t.numel(); ++i) t[i] = lo + 2.0f * spread * rng.uniform();
  return Var(t, true);
}

// Entries that are distinct multiples of 0.25 in random order (plus noise below 0.01), so a
// maximum leads the runner-up by far more than gradcheck's step: no tie within eps.
inline Var leaf_separated(Rng& rng, const Shape& shape) {
  Tensor t = Tensor::empty(shape);
  const int64_t n = t.numel();
  for (int64_t i = 0; i < n; ++i) t[i] = 0.25f * static_cast<float>(i - n / 2);
  for (int64_t i = n - 1; i > 0; --i)  // Fisher-Yates
    std::swap(t[i], t[static_cast<int64_t>(rng.below(static_cast<uint64_t>(i + 1)))]);
  for (int64_t i = 0; i < n; ++i) t[i] += 0.01f * rng.uniform();
  return Var(t, true);
}

inline std::vector<int32_t> random_ids(Rng& rng, int64_t n, int64_t below) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (auto& id : ids) id = static_cast<int32_t>(rng.below(static_cast<uint64_t>(below)));
  return ids;
}

// [1, 1, T, S] attention mask: causal (key j > query i is masked), and query 0 fully masked so
// the case covers a row with no allowed key (softmax gives zeros, never NaN).
inline Tensor causal_mask_with_empty_row(int64_t t, int64_t s) {
  Tensor m = Tensor::zeros(Shape{1, 1, t, s});
  for (int64_t i = 0; i < t; ++i)
    for (int64_t j = 0; j < s; ++j) m[i * s + j] = (i == 0 || j > i) ? 1.0f : 0.0f;
  return m;
}

// The default options (see gradcheck.h), except for the step where a case says otherwise.
inline GradcheckResult check(uint64_t seed, const std::function<Var()>& f,
                             const std::vector<Var>& wrt, double eps = GradcheckOptions{}.eps) {
  GradcheckOptions options;
  options.seed = seed * 0x9E3779B97F4A7C15ull + 1;  // projection independent of the inputs
  options.eps = eps;
  return gradcheck(f, wrt, options);
}

// A wider step for two situations where the default's rounding noise nears the tolerance:
// large logits (offset 1000, spread 3) give log-probabilities up to about 10 in magnitude, and
// oneDNN's logsoftmax forward carries errors of about 3e-6 (some 25 ulp) that vary unevenly
// with the input. The noise shrinks as 1/eps; Richardson keeps truncation near eps^4.
inline constexpr double kWideEps = 4e-2;

class Cases {
 public:
  void add(const char* name, std::string variant, std::function<GradcheckResult(uint64_t)> run) {
    cases_.push_back(GradcheckCase{name, "op", std::move(run), std::move(variant)});
  }
  std::vector<GradcheckCase> take() { return std::move(cases_); }

 private:
  std::vector<GradcheckCase> cases_;
};

// The families, in registration order (op_checks.cpp; softmaxes to attention: op_checks_nn.cpp).
void linear_algebra(Cases& c);
void elementwise(Cases& c);  // op_checks_elementwise.cpp, from the derivative table
void dropout_cases(Cases& c);
void shapes(Cases& c);
void softmaxes(Cases& c);
void cross_entropy_cases(Cases& c);
void layer_norm_cases(Cases& c);
void indexing(Cases& c);
void linears(Cases& c);
void add_layer_norm_cases(Cases& c);
void attention(Cases& c);
void reductions(Cases& c);    // op_checks_dims.cpp
void joins(Cases& c);         // op_checks_dims.cpp
void selection(Cases& c);     // op_checks_dims.cpp
void broadcasting(Cases& c);  // op_checks_broadcast.cpp: expand, where, masked_fill, einsum

}  // namespace headlab::op_checks
