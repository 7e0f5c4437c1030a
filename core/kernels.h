#pragma once
// Compute kernels behind one interface, so the backend is chosen at run time.
//
//   reference  plain loops (double accumulation where it matters): the oracle in tests
//   blas       OpenBLAS cblas_sgemm for matrix products; the rest as reference
//   onednn     oneDNN matmul, softmax, layer normalization and eltwise primitives
//
// All pointers are row-major fp32. Kernels write their outputs (they never accumulate, except
// gemm through beta); accumulation into gradients is the caller's business. Sizes of zero are
// allowed and do nothing.

#include <cstdint>
#include <string>
#include <string_view>

namespace headlab {

enum class Backend { reference, blas, onednn };

const char* backend_name(Backend b);
// "reference", "blas", "onednn" or "auto" (resolved by resolve_auto_backend()). Throws
// headlab::Error naming the value and the known names.
Backend parse_backend(std::string_view name);
// The fixed rule behind "auto" (never timing at run time, so runs stay reproducible).
Backend resolve_auto_backend();

// C[i] = alpha * op(A[i]) * op(B[i]) + beta * C[i] for i in [0, batch).
// op(A) is [m, k] and op(B) is [k, n]; A is stored [m, k] (or [k, m] when trans_a) with row
// stride lda, likewise B; C is [m, n] with row stride ldc; stride_* separate batch items.
// With beta == 0, C is not read (it may hold garbage or NaN).
struct GemmDesc {
  bool trans_a = false;
  bool trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  float alpha = 1.0f;
  float beta = 0.0f;
  int64_t lda = 0, ldb = 0, ldc = 0;  // 0: packed (k or m for A, n or k for B, n for C)
  int64_t batch = 1;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;  // 0: packed (m*k, k*n, m*n)

  // Fills the zero strides with their packed defaults.
  GemmDesc resolved() const;
};

class Kernels {
 public:
  virtual ~Kernels() = default;
  virtual Backend backend() const = 0;

  virtual void gemm(const GemmDesc& d, const float* a, const float* b, float* c) const;

  // Softmax over each row of [rows, cols]. Entries of -inf get weight 0; a row that is all
  // -inf gives all zeros (never NaN).
  virtual void softmax_forward(const float* x, float* y, int64_t rows, int64_t cols) const;
  // dx = y * (dy - sum_j dy_j y_j), row by row.
  virtual void softmax_backward(const float* y, const float* dy, float* dx, int64_t rows,
                                int64_t cols) const;
  // y = x - logsumexp(x) per row; a row that is all -inf gives all -inf.
  virtual void log_softmax_forward(const float* x, float* y, int64_t rows, int64_t cols) const;
  // dx = dy - exp(y) * sum_j dy_j, row by row (y is the log-softmax output).
  virtual void log_softmax_backward(const float* y, const float* dy, float* dx, int64_t rows,
                                    int64_t cols) const;

  // y = (x - mean) * rstd * gamma + beta per row; saves mean and rstd ([rows] each).
  // gamma and beta may be null (no affine transform).
  virtual void layer_norm_forward(const float* x, const float* gamma, const float* beta,
                                  float* y, float* mean, float* rstd, int64_t rows, int64_t cols,
                                  float eps) const;
  // Writes dx [rows, cols] and, when non-null, dgamma and dbeta [cols] (summed over rows).
  virtual void layer_norm_backward(const float* x, const float* gamma, const float* mean,
                                   const float* rstd, const float* dy, float* dx, float* dgamma,
                                   float* dbeta, int64_t rows, int64_t cols) const;

  virtual void relu_forward(const float* x, float* y, int64_t n) const;
  virtual void relu_backward(const float* x, const float* dy, float* dx, int64_t n) const;
  // GELU in its exact erf form, x * Phi(x), as PyTorch's default.
  virtual void gelu_forward(const float* x, float* y, int64_t n) const;
  virtual void gelu_backward(const float* x, const float* dy, float* dx, int64_t n) const;
};

// The active backend's kernels (default: resolve_auto_backend()). Not thread-safe to switch
// while another thread computes.
const Kernels& kernels();
const Kernels& kernels_for(Backend b);
void set_backend(Backend b);
Backend current_backend();

}  // namespace headlab
