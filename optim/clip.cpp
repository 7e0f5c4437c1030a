#include "optim/clip.h"

#include <cmath>

#include "autograd/profile.h"
#include "core/error.h"

namespace headlab {

double grad_norm(const NamedParameters& params) {
  double total = 0.0;
  for (const auto& p : params) {
    if (!p.var.has_grad()) continue;
    const Tensor& grad = p.var.grad();
    const float* g = grad.data();
    const int64_t n = grad.numel();
    // Eight fixed lanes (lane j sums the elements i = j mod 8): the compiler may vectorize them
    // without reassociating, and the result is the same on every run.
    double lanes[8] = {};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
      for (int j = 0; j < 8; ++j) lanes[j] += static_cast<double>(g[i + j]) * g[i + j];
    for (; i < n; ++i) lanes[0] += static_cast<double>(g[i]) * g[i];
    for (double lane : lanes) total += lane;
  }
  return std::sqrt(total);
}

double clip_grad_norm(const NamedParameters& params, double max_norm) {
  ProfileRegion region("clip_grad_norm");
  if (std::isnan(max_norm)) fail("clip_grad_norm: max_norm is NaN but expected a number");
  const double norm = grad_norm(params);
  if (!std::isfinite(norm) || max_norm <= 0.0 || norm <= max_norm) return norm;
  const float factor = static_cast<float>(max_norm / (norm + 1e-6));
  for (const auto& p : params) {
    if (!p.var.has_grad()) continue;
    Tensor& grad = p.var.grad();
    float* g = grad.data();
    for (int64_t i = 0, n = grad.numel(); i < n; ++i) g[i] *= factor;
  }
  return norm;
}

}  // namespace headlab
