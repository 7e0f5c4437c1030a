#pragma once
// The concrete kernel backends (internal to core; use kernels() / kernels_for()).

#include <cstddef>

#include "core/kernels/kernels.h"

namespace headlab {

class ReferenceKernels final : public Kernels {
 public:
  Backend backend() const override { return Backend::reference; }
};

// OpenBLAS cblas_sgemm for matrix products (one call per batch item); the rest from Kernels.
class BlasKernels final : public Kernels {
 public:
  Backend backend() const override { return Backend::blas; }
  void gemm(const GemmDesc& d, const float* a, const float* b, float* c) const override;
};

// Every kernel on oneDNN primitives, created once per shape (core/kernels/onednn_cache.h).
class OneDnnKernels final : public Kernels {
 public:
  Backend backend() const override { return Backend::onednn; }
  void gemm(const GemmDesc& d, const float* a, const float* b, float* c) const override;
  void softmax_forward(const float* x, float* y, int64_t rows, int64_t cols) const override;
  void softmax_backward(const float* y, const float* dy, float* dx, int64_t rows,
                        int64_t cols) const override;
  void log_softmax_forward(const float* x, float* y, int64_t rows, int64_t cols) const override;
  void log_softmax_backward(const float* y, const float* dy, float* dx, int64_t rows,
                            int64_t cols) const override;
  void layer_norm_forward(const float* x, const float* gamma, const float* beta, float* y,
                          float* mean, float* rstd, int64_t rows, int64_t cols,
                          float eps) const override;
  void layer_norm_backward(const float* x, const float* gamma, const float* mean, const float* rstd,
                           const float* dy, float* dx, float* dgamma, float* dbeta, int64_t rows,
                           int64_t cols) const override;
  void relu_forward(const float* x, float* y, int64_t n) const override;
  void relu_backward(const float* x, const float* dy, float* dx, int64_t n) const override;
  void gelu_forward(const float* x, float* y, int64_t n) const override;
  void gelu_backward(const float* x, const float* dy, float* dx, int64_t n) const override;
};

// Number of oneDNN primitives created and cached so far (one per call shape and thread count).
size_t onednn_cached_primitives();

}  // namespace headlab
