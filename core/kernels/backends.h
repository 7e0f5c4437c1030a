#pragma once
// The kernel implementations (internal to core; use kernels() / kernels_for()):
//
//   Kernels                 the interface (kernels.h)
//     ReferenceKernels      reference.cpp, reference_fused.cpp, attention_reference.cpp
//     FastKernels           fast.cpp, fast_layer_norm.cpp, attention_fast.cpp: the vectorized
//                           fused kernels and attention (fast.h)
//       BlasKernels         blas.cpp: OpenBLAS products, the reference loops for the plain ops
//       OneDnnKernels       onednn.cpp, onednn_fused.cpp: oneDNN primitives (onednn_cache.h);
//                           its products run headlab's own GEMM where the CPU has AVX-512
//                           (in bf16 at Precision::bf16)
//   simd/                   the AVX-512 building blocks: the fp32 and bf16 GEMMs (gemm.h), the attention's
//                           small products, score-row softmax and register blocks, avx512.h
//
// The GEMM observer is notified in two places only, ReferenceKernels and FastKernels (whose
// flavours implement the unobserved matmul hooks).

#include <atomic>
#include <cstddef>

#include "core/kernels/kernels.h"

namespace headlab {

namespace detail {

extern std::atomic<GemmObserver*> g_gemm_observer;

inline void observe_gemm(const GemmDesc& d) {
  if (GemmObserver* o = g_gemm_observer.load(std::memory_order_relaxed)) [[unlikely]]
    o->on_gemm(d);
}

void notify_attention_gemms(GemmObserver& o, const AttentionDesc& d, bool backward);

inline void observe_attention(const AttentionDesc& d, bool backward) {
  if (GemmObserver* o = g_gemm_observer.load(std::memory_order_relaxed)) [[unlikely]]
    notify_attention_gemms(*o, d, backward);
}

// The reference GEMM loops, unobserved (ReferenceKernels::gemm and gemm_bias_act run them).
void reference_gemm(const GemmDesc& d, const float* a, const float* b, float* c);
// c [m, n] (rows ldc apart) += bias per column (null: none), then max(0, .) when relu.
void reference_bias_act(float* c, int64_t m, int64_t n, int64_t ldc, const float* bias, bool relu);

}  // namespace detail

class ReferenceKernels final : public Kernels {
 public:
  Backend backend() const override { return Backend::reference; }
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
  void gemm_bias_act(const GemmDesc& d, const float* a, const float* b, const float* bias,
                     bool relu, float* c) const override;
  void bias_act_backward(const float* dy, const float* y, float* dz, float* db, int64_t rows,
                         int64_t cols) const override;
  void add_layer_norm_forward(const float* x, const float* r, const float* gamma, const float* beta,
                              float* y, float* xhat, float* rstd, int64_t rows, int64_t cols,
                              float eps) const override;
  void add_layer_norm_backward(const float* xhat, const float* rstd, const float* gamma,
                               const float* dy, float* dx, bool accumulate_dx, float* dr,
                               bool accumulate_dr, float* dgamma, float* dbeta, int64_t rows,
                               int64_t cols) const override;
  void attention_forward(const AttentionDesc& d, const float* qkv, float* p, float* p_drop,
                         float* out) const override;
  void attention_backward(const AttentionDesc& d, const float* qkv, const float* p,
                          const float* p_drop, const float* dout, float* dqkv,
                          bool accumulate) const override;
};

// The fused kernels and the fused attention, vectorized; the matrix products and the plain ops
// (softmax, LayerNorm, activations) come from the flavour.
class FastKernels : public Kernels {
 public:
  void gemm(const GemmDesc& d, const float* a, const float* b, float* c) const final;
  void gemm_bias_act(const GemmDesc& d, const float* a, const float* b, const float* bias,
                     bool relu, float* c) const final;
  void bias_act_backward(const float* dy, const float* y, float* dz, float* db, int64_t rows,
                         int64_t cols) const final;
  void add_layer_norm_forward(const float* x, const float* r, const float* gamma, const float* beta,
                              float* y, float* xhat, float* rstd, int64_t rows, int64_t cols,
                              float eps) const final;
  void add_layer_norm_backward(const float* xhat, const float* rstd, const float* gamma,
                               const float* dy, float* dx, bool accumulate_dx, float* dr,
                               bool accumulate_dr, float* dgamma, float* dbeta, int64_t rows,
                               int64_t cols) const final;
  void attention_forward(const AttentionDesc& d, const float* qkv, float* p, float* p_drop,
                         float* out) const final;
  void attention_backward(const AttentionDesc& d, const float* qkv, const float* p,
                          const float* p_drop, const float* dout, float* dqkv,
                          bool accumulate) const final;

 protected:
  // The flavour's products, unobserved (gemm and gemm_bias_act observe, then call these).
  virtual void matmul(const GemmDesc& d, const float* a, const float* b, float* c) const = 0;
  // Default: matmul, then the bias and ReLU in one vectorized pass over C.
  virtual void matmul_bias_act(const GemmDesc& d, const float* a, const float* b, const float* bias,
                               bool relu, float* c) const;
};

class BlasKernels final : public FastKernels {
 public:
  Backend backend() const override { return Backend::blas; }
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

 protected:
  // cblas_sgemm, one call per batch item.
  void matmul(const GemmDesc& d, const float* a, const float* b, float* c) const override;

 private:
  ReferenceKernels loops_;
};

class OneDnnKernels final : public FastKernels {
 public:
  Backend backend() const override { return Backend::onednn; }
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
  // At Precision::bf16, the ReLU mask and the bias gradient happen while the bf16 products pack
  // g (simd/gemm.h, Bf16A): no dz is written, and db comes from dW's packing of g. fp32: the
  // default composition.
  void linear_backward(const float* g, const float* y, const float* x, const float* w, int64_t rows,
                       int64_t in, int64_t out, const LinearGrads& grads) const override;

 protected:
  // One matmul primitive per shape; with bias and ReLU fused into it (no pass over C).
  void matmul(const GemmDesc& d, const float* a, const float* b, float* c) const override;
  void matmul_bias_act(const GemmDesc& d, const float* a, const float* b, const float* bias,
                       bool relu, float* c) const override;
};

// Number of oneDNN primitives created and cached so far (one per call shape and thread count).
size_t onednn_cached_primitives();

}  // namespace headlab
