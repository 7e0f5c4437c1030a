// The reference kernels: plain loops, written from the formulas, with double accumulation. The
// oracle of the kernel tests; the blas backend runs the plain ops (softmax, LayerNorm, the
// activations) from here too.

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/kernels/backends.h"

namespace headlab {

namespace detail {

void reference_gemm(const GemmDesc& desc, const float* a, const float* b, float* c) {
  const GemmDesc d = desc.resolved();
  for (int64_t bi = 0; bi < d.batch; ++bi) {
    const float* A = a + bi * d.stride_a;
    const float* B = b + bi * d.stride_b;
    float* C = c + bi * d.stride_c;
    for (int64_t i = 0; i < d.m; ++i) {
      for (int64_t j = 0; j < d.n; ++j) {
        double acc = 0.0;
        for (int64_t p = 0; p < d.k; ++p) {
          const float av = d.trans_a ? A[p * d.lda + i] : A[i * d.lda + p];
          const float bv = d.trans_b ? B[j * d.ldb + p] : B[p * d.ldb + j];
          acc += static_cast<double>(av) * bv;
        }
        const double prior = d.beta == 0.0f ? 0.0 : static_cast<double>(d.beta) * C[i * d.ldc + j];
        C[i * d.ldc + j] = static_cast<float>(d.alpha * acc + prior);
      }
    }
  }
}

}  // namespace detail

void ReferenceKernels::gemm(const GemmDesc& d, const float* a, const float* b, float* c) const {
  detail::observe_gemm(d);
  detail::reference_gemm(d, a, b, c);
}

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// A row's maximum and sum_j exp(x_j - max) in double; max is -inf for a fully masked row.
struct ExpSum {
  float max;
  double sum;
};
ExpSum exp_sum(const float* xr, int64_t cols) {
  float max = kNegInf;
  for (int64_t j = 0; j < cols; ++j) max = std::max(max, xr[j]);
  double sum = 0.0;
  if (max != kNegInf)
    for (int64_t j = 0; j < cols; ++j) sum += std::exp(static_cast<double>(xr[j]) - max);
  return {max, sum};
}

}  // namespace

void ReferenceKernels::softmax_forward(const float* x, float* y, int64_t rows, int64_t cols) const {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    const ExpSum e = exp_sum(xr, cols);
    if (e.max == kNegInf) {  // fully masked row
      std::fill_n(yr, cols, 0.0f);
      continue;
    }
    for (int64_t j = 0; j < cols; ++j)
      yr[j] = static_cast<float>(std::exp(static_cast<double>(xr[j]) - e.max) / e.sum);
  }
}

void ReferenceKernels::softmax_backward(const float* y, const float* dy, float* dx, int64_t rows,
                                        int64_t cols) const {
  for (int64_t r = 0; r < rows; ++r) {
    const float* yr = y + r * cols;
    const float* gr = dy + r * cols;
    double dot = 0.0;
    for (int64_t j = 0; j < cols; ++j) dot += static_cast<double>(gr[j]) * yr[j];
    for (int64_t j = 0; j < cols; ++j) dx[r * cols + j] = static_cast<float>(yr[j] * (gr[j] - dot));
  }
}

void ReferenceKernels::log_softmax_forward(const float* x, float* y, int64_t rows,
                                           int64_t cols) const {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    const ExpSum e = exp_sum(xr, cols);
    if (e.max == kNegInf) {
      std::fill_n(yr, cols, kNegInf);
      continue;
    }
    const double lse = e.max + std::log(e.sum);
    for (int64_t j = 0; j < cols; ++j) yr[j] = static_cast<float>(xr[j] - lse);
  }
}

void ReferenceKernels::log_softmax_backward(const float* y, const float* dy, float* dx,
                                            int64_t rows, int64_t cols) const {
  for (int64_t r = 0; r < rows; ++r) {
    const float* yr = y + r * cols;
    const float* gr = dy + r * cols;
    double sum = 0.0;
    for (int64_t j = 0; j < cols; ++j) sum += gr[j];
    for (int64_t j = 0; j < cols; ++j)
      dx[r * cols + j] = static_cast<float>(gr[j] - std::exp(static_cast<double>(yr[j])) * sum);
  }
}

void ReferenceKernels::layer_norm_forward(const float* x, const float* gamma, const float* beta,
                                          float* y, float* mean, float* rstd, int64_t rows,
                                          int64_t cols, float eps) const {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    double m = 0.0;
    for (int64_t j = 0; j < cols; ++j) m += xr[j];
    m /= static_cast<double>(cols);
    double var = 0.0;
    for (int64_t j = 0; j < cols; ++j) var += (xr[j] - m) * (xr[j] - m);
    var /= static_cast<double>(cols);  // biased variance, as the paper and PyTorch
    const double rs = 1.0 / std::sqrt(var + eps);
    mean[r] = static_cast<float>(m);
    rstd[r] = static_cast<float>(rs);
    for (int64_t j = 0; j < cols; ++j) {
      double v = (xr[j] - m) * rs;
      if (gamma) v *= gamma[j];
      if (beta) v += beta[j];
      y[r * cols + j] = static_cast<float>(v);
    }
  }
}

// With xhat = (x - mean) * rstd and g = dy * gamma:
//   dx = rstd * (g - mean_j(g) - xhat * mean_j(g * xhat)),
//   dgamma = sum_rows dy * xhat, dbeta = sum_rows dy.
void ReferenceKernels::layer_norm_backward(const float* x, const float* gamma, const float* mean,
                                           const float* rstd, const float* dy, float* dx,
                                           float* dgamma, float* dbeta, int64_t rows,
                                           int64_t cols) const {
  if (dgamma) std::fill_n(dgamma, cols, 0.0f);
  if (dbeta) std::fill_n(dbeta, cols, 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    const float* gr = dy + r * cols;
    double mean_g = 0.0, mean_gx = 0.0;
    for (int64_t j = 0; j < cols; ++j) {
      const double xhat = (xr[j] - mean[r]) * static_cast<double>(rstd[r]);
      const double g = gr[j] * (gamma ? gamma[j] : 1.0f);
      mean_g += g;
      mean_gx += g * xhat;
      if (dgamma) dgamma[j] += static_cast<float>(gr[j] * xhat);
      if (dbeta) dbeta[j] += gr[j];
    }
    mean_g /= static_cast<double>(cols);
    mean_gx /= static_cast<double>(cols);
    for (int64_t j = 0; j < cols; ++j) {
      const double xhat = (xr[j] - mean[r]) * static_cast<double>(rstd[r]);
      const double g = gr[j] * (gamma ? gamma[j] : 1.0f);
      dx[r * cols + j] = static_cast<float>(rstd[r] * (g - mean_g - xhat * mean_gx));
    }
  }
}

void ReferenceKernels::relu_forward(const float* x, float* y, int64_t n) const {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

void ReferenceKernels::relu_backward(const float* x, const float* dy, float* dx, int64_t n) const {
  for (int64_t i = 0; i < n; ++i) dx[i] = x[i] > 0.0f ? dy[i] : 0.0f;
}

void ReferenceKernels::gelu_forward(const float* x, float* y, int64_t n) const {
  for (int64_t i = 0; i < n; ++i) {
    const double v = x[i];
    y[i] = static_cast<float>(0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))));
  }
}

// d/dx [x Phi(x)] = Phi(x) + x phi(x).
void ReferenceKernels::gelu_backward(const float* x, const float* dy, float* dx, int64_t n) const {
  for (int64_t i = 0; i < n; ++i) {
    const double v = x[i];
    const double cdf = 0.5 * (1.0 + std::erf(v / std::sqrt(2.0)));
    const double pdf = std::exp(-0.5 * v * v) / std::sqrt(2.0 * M_PI);
    dx[i] = static_cast<float>(dy[i] * (cdf + v * pdf));
  }
}

}  // namespace headlab
