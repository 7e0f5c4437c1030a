#pragma once
// Helpers shared by the kernel tests (test_kernels.cpp, test_fused_kernels.cpp): random inputs
// and a tolerance check that reports the largest violation rather than a bare pass/fail.

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/kernels/kernels.h"
#include "core/rng.h"

namespace headlab::kernel_test {

inline constexpr float kNegInf = -std::numeric_limits<float>::infinity();
inline const Backend kFast[] = {Backend::blas, Backend::onednn};

inline std::vector<float> random_vec(size_t n, Rng& rng, float lo = -1.0f, float hi = 1.0f) {
  std::vector<float> v(n);
  for (float& x : v) x = rng.uniform(lo, hi);
  return v;
}

// Largest violation of |got - want| <= rel * scale_i + abs (scale_i = 1 + |want_i| when no scale
// is given); <= 0 means every element is within.
inline double worst(const std::vector<float>& got, const std::vector<float>& want, double rel,
                    double abs_tol, const std::vector<float>* scale = nullptr) {
  REQUIRE(got.size() == want.size());
  double w = -1.0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double s = scale ? (*scale)[i] : 1.0 + std::fabs(want[i]);
    const double excess = std::fabs(double(got[i]) - want[i]) - (rel * s + abs_tol);
    if (!(excess <= 0.0)) w = std::max(w, std::isnan(excess) ? 1e30 : excess);
  }
  return w;
}

}  // namespace headlab::kernel_test
