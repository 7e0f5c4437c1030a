// RMSNorm's op and layer. Per row of D values, with r = 1/sqrt(mean(x^2) + eps):
//   y_i = x_i r w_i
//   dL/dw_i = sum over rows of g_i x_i r
//   dL/dx_j = sum_i g_i w_i d(x_i r)/dx_j = r g_j w_j + (sum_i g_i w_i x_i) dr/dx_j
//   with dr/dx_j = -r^3 x_j / D:  dL/dx_j = r g_j w_j - (r^3 / D) x_j sum_i g_i w_i x_i

#include "rms_norm.h"

#include <cmath>

#include "autograd/grad.h"
#include "autograd/tape.h"
#include "core/error.h"

namespace custom {

using headlab::Tensor;
using headlab::Var;

Var rms_norm(const Var& x, const Var& weight, float eps) {
  if (x.rank() < 1 || weight.shape() != headlab::Shape{x.size(-1)})
    headlab::fail("rms_norm: weight shape {} does not match the last dim of x {}",
                  weight.shape().str(), x.shape().str());
  const int64_t d = x.size(-1), rows = x.numel() / d;
  Var out = headlab::make_output("rms_norm", x.shape(), {&x, &weight});
  Tensor rstd = Tensor::empty({rows});  // saved for backward
  const float* xv = x.value().data();
  const float* w = weight.value().data();
  float* y = out.value().data();
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < d; ++i) ss += static_cast<double>(xv[r * d + i]) * xv[r * d + i];
    const float rs = static_cast<float>(1.0 / std::sqrt(ss / d + eps));
    rstd[r] = rs;
    for (int64_t i = 0; i < d; ++i) y[r * d + i] = xv[r * d + i] * rs * w[i];
  }

  headlab::record("rms_norm", out, [x, weight, rstd, rows, d](const Tensor& g) {
    const float* xv = x.value().data();
    const float* w = weight.value().data();
    headlab::grad::add(x, [&](Tensor& dx) {
      for (int64_t r = 0; r < rows; ++r) {
        const float* gr = g.data() + r * d;
        const float* xr = xv + r * d;
        double s = 0;
        for (int64_t i = 0; i < d; ++i) s += static_cast<double>(gr[i]) * w[i] * xr[i];
        const double rs = rstd[r], c = rs * rs * rs * s / d;
        for (int64_t j = 0; j < d; ++j)
          dx[r * d + j] = static_cast<float>(rs * gr[j] * w[j] - c * xr[j]);
      }
    });
    headlab::grad::add(weight, [&](Tensor& dw) {
      dw.zero_();
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t i = 0; i < d; ++i) dw[i] += g[r * d + i] * xv[r * d + i] * rstd[r];
    });
  });
  return out;
}

RMSNorm::RMSNorm(const RMSNormOptions& options) : options_(options) {
  if (options.d_model <= 0)
    headlab::fail("rms_norm: d_model is {} but must be positive", options.d_model);
  weight = register_parameter("weight", Tensor::full({options.d_model}, 1.0f));
}

Var RMSNorm::forward(const Var& x) {
  return rms_norm(x, weight, options_.eps);
}

std::shared_ptr<headlab::SequenceLayer> make_rms_norm(headlab::LayerOptions& o) {
  RMSNormOptions options;
  options.d_model = o.require_int("d_model");
  options.eps = o.get_float("eps", 1e-6f);
  return std::make_shared<RMSNorm>(options);
}

int64_t count_rms_norm_parameters(headlab::LayerOptions& o) {
  return o.require_int("d_model");  // the weight [d_model]
}

// The one line that makes "rms_norm" available to configs.
static const headlab::LayerRegistrar rms_norm_registrar("rms_norm", headlab::LayerKind::norm,
                                                        make_rms_norm, count_rms_norm_parameters);

}  // namespace custom
