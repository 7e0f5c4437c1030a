#pragma once
// Compute kernels behind one interface, so the backend is chosen at run time. Two
// implementations (core/kernels/backends.h), three run-time backends:
//
//   reference  ReferenceKernels: plain loops written from the formulas, double accumulation
//              where it matters. The oracle in tests.
//   blas       FastKernels with OpenBLAS cblas_sgemm for matrix products; softmax, LayerNorm and
//              the activations from the reference loops (OpenBLAS has none).
//   onednn     FastKernels with oneDNN primitives for softmax, layer normalization and the
//              activations; matrix products by headlab's own AVX-512 GEMM where the CPU has
//              AVX-512 (simd/gemm.h; bias and ReLU fused into gemm_bias_act), by oneDNN's matmul
//              elsewhere.
//
// FastKernels' own are the fused kernels and the fused attention: vectorized loops (AVX-512
// where the CPU has it), the same on both fast backends.
//
// All pointers are row-major fp32. Kernels write their outputs (they never accumulate, except
// gemm through beta and the backward kernels that take an accumulate flag); accumulation into
// gradients is the caller's business. Sizes of zero are allowed and do nothing.

#include <cstdint>
#include <string_view>
#include <vector>

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

// Shapes and options of the fused multi-head self-attention (Kernels::attention_forward and
// attention_backward; readable in attention_reference.cpp, fast in attention_fast.cpp). Both
// implementations work on the same packed layouts, with B batch, T tokens, h heads of width d:
//   qkv [B, T, 3, h, d]  each token's Q, K and V side by side (what the projection by
//                        MultiHeadAttention's in_proj_weight [3 h d, D] gives): Q of head i at
//                        columns [i d, (i + 1) d), K h d later, V 2 h d
//   p   [B, h, T, T]     the softmax weights per head, saved for backward (p_drop likewise:
//                        p times the dropout multipliers)
//   out [B, T, h, d]     the heads side by side (merge_heads' layout), ready for w_o
// so no head-major copy of Q, K, V or the output is made.
struct AttentionDesc {
  int64_t batch = 0, heads = 0, len = 0, dim = 0;  // B, h, T, d
  float scale = 1.0f;
  const float* key_padding_mask = nullptr;  // [B, T], nonzero = that key masked; or null
  const float* attn_mask = nullptr;         // [T, T], nonzero at (t, s) hides key s from t
  const float* dropout_mask = nullptr;      // [B, h, T, T] multipliers (0 or 1/(1-p)), or null
};

// The batched GEMMs the fused attention stands for (what the composed ops would run): forward
// S = scale Q K^T and O = P' V; backward dP' = dO V^T, dV = P'^T dO, dQ = scale dS K and
// dK = scale dS^T Q, each batched over the B h heads. GEMM observers receive these, so a
// benchmark's GEMM-only time counts the same products with the fused kernel as without it.
std::vector<GemmDesc> attention_gemms(const AttentionDesc& d, bool backward);

class Kernels {
 public:
  virtual ~Kernels() = default;
  virtual Backend backend() const = 0;

  virtual void gemm(const GemmDesc& d, const float* a, const float* b, float* c) const = 0;

  // Softmax over each row of [rows, cols]. Entries of -inf get weight 0; a row that is all
  // -inf gives all zeros (never NaN).
  virtual void softmax_forward(const float* x, float* y, int64_t rows, int64_t cols) const = 0;
  // dx = y * (dy - sum_j dy_j y_j), row by row.
  virtual void softmax_backward(const float* y, const float* dy, float* dx, int64_t rows,
                                int64_t cols) const = 0;
  // y = x - logsumexp(x) per row; a row that is all -inf gives all -inf.
  virtual void log_softmax_forward(const float* x, float* y, int64_t rows, int64_t cols) const = 0;
  // dx = dy - exp(y) * sum_j dy_j, row by row (y is the log-softmax output).
  virtual void log_softmax_backward(const float* y, const float* dy, float* dx, int64_t rows,
                                    int64_t cols) const = 0;

  // y = (x - mean) * rstd * gamma + beta per row; saves mean and rstd ([rows] each).
  // gamma and beta may be null (no affine transform).
  virtual void layer_norm_forward(const float* x, const float* gamma, const float* beta, float* y,
                                  float* mean, float* rstd, int64_t rows, int64_t cols,
                                  float eps) const = 0;
  // Writes dx [rows, cols] and, when non-null, dgamma and dbeta [cols] (summed over rows).
  virtual void layer_norm_backward(const float* x, const float* gamma, const float* mean,
                                   const float* rstd, const float* dy, float* dx, float* dgamma,
                                   float* dbeta, int64_t rows, int64_t cols) const = 0;

  virtual void relu_forward(const float* x, float* y, int64_t n) const = 0;
  virtual void relu_backward(const float* x, const float* dy, float* dx, int64_t n) const = 0;
  // GELU in its exact erf form, x * Phi(x), as PyTorch's default.
  virtual void gelu_forward(const float* x, float* y, int64_t n) const = 0;
  virtual void gelu_backward(const float* x, const float* dy, float* dx, int64_t n) const = 0;

  // ---- Fused kernels: one pass where the composed ops take several.

  // C = act(op(A) op(B) + bias) for one product (d.batch 1, d.alpha 1, d.beta 0; throws
  // InternalError otherwise): bias [n] (null: none) is added to every row of C [m, n]; act is
  // max(0, .) when relu, else the identity.
  virtual void gemm_bias_act(const GemmDesc& d, const float* a, const float* b, const float* bias,
                             bool relu, float* c) const = 0;
  // Bias gradient of [rows, cols] rows, with the ReLU backward fused in when y is non-null:
  //   dz = dy * (y > 0) (written to dz, which may alias dy), db[j] = sum_r dz[r, j].
  // With y null, dz is not written and db sums dy. db may be null (no bias).
  virtual void bias_act_backward(const float* dy, const float* y, float* dz, float* db,
                                 int64_t rows, int64_t cols) const = 0;
  // The backward of the linear layer y = act(x W^T + b) (gemm_bias_act's; x [rows, in], W [out,
  // in]) from g = dL/dy [rows, out] and, when act was ReLU, y itself (null: no ReLU). With
  // dz = g * (y > 0) (g without ReLU):
  //   db[j] = sum_r dz[r, j]  [out]        (grads.db, written; null: not wanted)
  //   dx = dz W               [rows, in]   (grads.dx, added when accumulate_dx, else written)
  //   dW = dz^T x             [out, in]    (grads.dw likewise; a null target: not wanted)
  // The default composes bias_act_backward (into a pooled dz after a ReLU) and two gemm calls;
  // a backend may fuse the mask and the bias gradient into its products (the onednn backend's
  // bf16 products do: no dz is written). Either way the GEMM observer sees both products.
  struct LinearGrads {
    float* dx = nullptr;
    bool accumulate_dx = false;
    float* dw = nullptr;
    bool accumulate_dw = false;
    float* db = nullptr;
  };
  virtual void linear_backward(const float* g, const float* y, const float* x, const float* w,
                               int64_t rows, int64_t in, int64_t out,
                               const LinearGrads& grads) const;
  // The two products of linear_backward, for observers and benchmarks.
  static GemmDesc linear_dx_desc(int64_t rows, int64_t in, int64_t out, bool accumulate);
  static GemmDesc linear_dw_desc(int64_t rows, int64_t in, int64_t out, bool accumulate);
  // y = LayerNorm(x + r) per row of [rows, cols]: xhat = (s - mean(s)) * rstd with s = x + r and
  // rstd = 1 / sqrt(var(s) + eps) (biased variance), y = xhat * gamma + beta (gamma, beta [cols]
  // or null). Writes y, xhat [rows, cols] and rstd [rows] (what the backward needs).
  virtual void add_layer_norm_forward(const float* x, const float* r, const float* gamma,
                                      const float* beta, float* y, float* xhat, float* rstd,
                                      int64_t rows, int64_t cols, float eps) const = 0;
  // Its backward from the saved xhat and rstd: with u = dy * gamma (dy without gamma),
  //   ds = rstd * (u - mean(u) - xhat * mean(u * xhat)),  dgamma = sum_r dy xhat,  dbeta = sum_r
  //   dy.
  // ds is the gradient of both x and r: it is written to dx, and to dr when non-null; a target
  // whose accumulate flag is set gets ds added instead (no temporary for a gradient that
  // already holds a contribution). dgamma and dbeta ([cols], written) may be null.
  virtual void add_layer_norm_backward(const float* xhat, const float* rstd, const float* gamma,
                                       const float* dy, float* dx, bool accumulate_dx, float* dr,
                                       bool accumulate_dr, float* dgamma, float* dbeta,
                                       int64_t rows, int64_t cols) const = 0;

  // Fused multi-head self-attention over packed projections (autograd's self_attention; layouts
  // of qkv, p and out at AttentionDesc). Per batch item b and head i:
  //   P = softmax(scale Q K^T + masks)  [T, T] -> p (a row with every key masked is zeros);
  //   P' = P * dropout multipliers -> p_drop (only with a dropout mask);
  //   O = P' V (P V without dropout)    [T, d] -> out.
  virtual void attention_forward(const AttentionDesc& d, const float* qkv, float* p, float* p_drop,
                                 float* out) const = 0;
  // Its backward from dout [B, T, h, d] and the saved p (and p_drop): with dP' = dO V^T and
  // dS = P * (dP - rowsum(P * dP)), dP = dP' * multipliers,
  //   dQ = scale dS K, dK = scale dS^T Q, dV = P'^T dO  -> dqkv [B, T, 3, h, d],
  // written, or added into dqkv when accumulate.
  virtual void attention_backward(const AttentionDesc& d, const float* qkv, const float* p,
                                  const float* p_drop, const float* dout, float* dqkv,
                                  bool accumulate) const = 0;
};

// The active backend's kernels (default: resolve_auto_backend()). Not thread-safe to switch
// while another thread computes.
const Kernels& kernels();
const Kernels& kernels_for(Backend b);
void set_backend(Backend b);
Backend current_backend();

// The precision of the onednn backend's matrix products (runtime.precision; docs/performance.md,
// "bf16"). fp32: fp32 operands. bf16: both operands rounded to bf16 (round to nearest even) and
// multiplied on the CPU's AVX512_BF16 dot-product instructions with fp32 accumulation and an fp32
// C, for single products (batch 1: every Linear, forward and backward); batched products (the
// composed attention's per-head ones) and everything else (the fused attention, softmax, LayerNorm, reductions, master weights and
// optimizer state) stays fp32. The reference and blas backends always run fp32.
enum class Precision { fp32, bf16 };
const char* precision_name(Precision p);
// Whether this CPU has the AVX512_BF16 instructions the bf16 products run on (cpuid, checked once).
bool bf16_supported();
// Throws headlab::Error for bf16 where bf16_supported() is false. Like set_backend, not to be
// switched while another thread computes.
void set_precision(Precision p);
Precision current_precision();

// Sees the matrix products the kernels run, for benchmarks (the GEMM-only time of a training
// step). Every implementation reports the descriptor of each gemm and gemm_bias_act call, and
// for the fused attention the attention_gemms() it stands for, before computing.
class GemmObserver {
 public:
  virtual ~GemmObserver() = default;
  virtual void on_gemm(const GemmDesc& d) = 0;
};

// Installs `observer` for every backend (null, the default, removes it; an unset observer costs
// one relaxed atomic load per call). Set it from the thread that runs the kernels, while nothing
// else computes; the observer must outlive its installation.
void set_gemm_observer(GemmObserver* observer);

}  // namespace headlab
