// The fused kernels of ReferenceKernels (see kernels.h): plain loops with double accumulation,
// the oracle for the vectorized ones in fast.cpp.

#include <cmath>

#include "core/error.h"
#include "core/kernels/backends.h"

namespace headlab {

namespace detail {

void reference_bias_act(float* c, int64_t m, int64_t n, int64_t ldc, const float* bias, bool relu) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      float& v = c[i * ldc + j];
      if (bias) v += bias[j];
      if (relu) v = v > 0.0f ? v : 0.0f;
    }
}

}  // namespace detail

void ReferenceKernels::gemm_bias_act(const GemmDesc& d, const float* a, const float* b,
                                     const float* bias, bool relu, float* c) const {
  HEADLAB_ASSERT(d.batch == 1 && d.alpha == 1.0f && d.beta == 0.0f);
  detail::observe_gemm(d);
  detail::reference_gemm(d, a, b, c);
  detail::reference_bias_act(c, d.m, d.n, d.ldc == 0 ? d.n : d.ldc, bias, relu);
}

void ReferenceKernels::bias_act_backward(const float* dy, const float* y, float* dz, float* db,
                                         int64_t rows, int64_t cols) const {
  if (y)
    for (int64_t i = 0; i < rows * cols; ++i) dz[i] = y[i] > 0.0f ? dy[i] : 0.0f;
  if (!db) return;
  const float* src = y ? dz : dy;
  for (int64_t j = 0; j < cols; ++j) {
    double acc = 0.0;
    for (int64_t r = 0; r < rows; ++r) acc += src[r * cols + j];
    db[j] = static_cast<float>(acc);
  }
}

void ReferenceKernels::add_layer_norm_forward(const float* x, const float* r, const float* gamma,
                                              const float* beta, float* y, float* xhat, float* rstd,
                                              int64_t rows, int64_t cols, float eps) const {
  for (int64_t i = 0; i < rows; ++i) {
    const float* xi = x + i * cols;
    const float* ri = r + i * cols;
    double m = 0.0;
    for (int64_t j = 0; j < cols; ++j) m += static_cast<double>(xi[j] + ri[j]);
    m /= static_cast<double>(cols);
    double var = 0.0;
    for (int64_t j = 0; j < cols; ++j) {
      const double d = static_cast<double>(xi[j] + ri[j]) - m;
      var += d * d;
    }
    var /= static_cast<double>(cols);
    const double rs = 1.0 / std::sqrt(var + eps);
    rstd[i] = static_cast<float>(rs);
    for (int64_t j = 0; j < cols; ++j) {
      const double h = (static_cast<double>(xi[j] + ri[j]) - m) * rs;
      xhat[i * cols + j] = static_cast<float>(h);
      double v = h;
      if (gamma) v *= gamma[j];
      if (beta) v += beta[j];
      y[i * cols + j] = static_cast<float>(v);
    }
  }
}

void ReferenceKernels::add_layer_norm_backward(const float* xhat, const float* rstd,
                                               const float* gamma, const float* dy, float* dx,
                                               bool accumulate_dx, float* dr, bool accumulate_dr,
                                               float* dgamma, float* dbeta, int64_t rows,
                                               int64_t cols) const {
  for (int64_t i = 0; i < rows; ++i) {
    const float* h = xhat + i * cols;
    const float* g = dy + i * cols;
    double su = 0.0, suh = 0.0;
    for (int64_t j = 0; j < cols; ++j) {
      const double u = gamma ? static_cast<double>(g[j]) * gamma[j] : g[j];
      su += u;
      suh += u * h[j];
    }
    const double mu = su / static_cast<double>(cols), muh = suh / static_cast<double>(cols);
    for (int64_t j = 0; j < cols; ++j) {
      const double u = gamma ? static_cast<double>(g[j]) * gamma[j] : g[j];
      const float ds = static_cast<float>(rstd[i] * (u - mu - h[j] * muh));
      dx[i * cols + j] = accumulate_dx ? dx[i * cols + j] + ds : ds;
      if (dr) dr[i * cols + j] = accumulate_dr ? dr[i * cols + j] + ds : ds;
    }
  }
  for (int64_t j = 0; j < cols; ++j) {
    double sg = 0.0, sb = 0.0;
    for (int64_t i = 0; i < rows; ++i) {
      sg += static_cast<double>(dy[i * cols + j]) * xhat[i * cols + j];
      sb += dy[i * cols + j];
    }
    if (dgamma) dgamma[j] = static_cast<float>(sg);
    if (dbeta) dbeta[j] = static_cast<float>(sb);
  }
}

}  // namespace headlab
