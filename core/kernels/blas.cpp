// The blas flavour of FastKernels: cblas_sgemm for matrix products. OpenBLAS has no softmax,
// LayerNorm or activations, so those run the reference loops (and give the reference's numbers).

#include <cblas.h>

#include "core/kernels/backends.h"

namespace headlab {

void BlasKernels::matmul(const GemmDesc& desc, const float* a, const float* b, float* c) const {
  const GemmDesc d = desc.resolved();
  if (d.m == 0 || d.n == 0) return;
  for (int64_t i = 0; i < d.batch; ++i) {
    cblas_sgemm(CblasRowMajor, d.trans_a ? CblasTrans : CblasNoTrans,
                d.trans_b ? CblasTrans : CblasNoTrans, static_cast<blasint>(d.m),
                static_cast<blasint>(d.n), static_cast<blasint>(d.k), d.alpha, a + i * d.stride_a,
                static_cast<blasint>(d.lda), b + i * d.stride_b, static_cast<blasint>(d.ldb),
                d.beta, c + i * d.stride_c, static_cast<blasint>(d.ldc));
  }
}

void BlasKernels::softmax_forward(const float* x, float* y, int64_t rows, int64_t cols) const {
  loops_.softmax_forward(x, y, rows, cols);
}
void BlasKernels::softmax_backward(const float* y, const float* dy, float* dx, int64_t rows,
                                   int64_t cols) const {
  loops_.softmax_backward(y, dy, dx, rows, cols);
}
void BlasKernels::log_softmax_forward(const float* x, float* y, int64_t rows, int64_t cols) const {
  loops_.log_softmax_forward(x, y, rows, cols);
}
void BlasKernels::log_softmax_backward(const float* y, const float* dy, float* dx, int64_t rows,
                                       int64_t cols) const {
  loops_.log_softmax_backward(y, dy, dx, rows, cols);
}
void BlasKernels::layer_norm_forward(const float* x, const float* gamma, const float* beta,
                                     float* y, float* mean, float* rstd, int64_t rows, int64_t cols,
                                     float eps) const {
  loops_.layer_norm_forward(x, gamma, beta, y, mean, rstd, rows, cols, eps);
}
void BlasKernels::layer_norm_backward(const float* x, const float* gamma, const float* mean,
                                      const float* rstd, const float* dy, float* dx, float* dgamma,
                                      float* dbeta, int64_t rows, int64_t cols) const {
  loops_.layer_norm_backward(x, gamma, mean, rstd, dy, dx, dgamma, dbeta, rows, cols);
}
void BlasKernels::relu_forward(const float* x, float* y, int64_t n) const {
  loops_.relu_forward(x, y, n);
}
void BlasKernels::relu_backward(const float* x, const float* dy, float* dx, int64_t n) const {
  loops_.relu_backward(x, dy, dx, n);
}
void BlasKernels::gelu_forward(const float* x, float* y, int64_t n) const {
  loops_.gelu_forward(x, y, n);
}
void BlasKernels::gelu_backward(const float* x, const float* dy, float* dx, int64_t n) const {
  loops_.gelu_backward(x, dy, dx, n);
}

}  // namespace headlab
