#include "core/kernels/kernels.h"

#include <atomic>

#include "core/error.h"
#include "core/kernels/backends.h"

namespace headlab {
namespace {

std::atomic<Backend>& active() {
  static std::atomic<Backend> b{resolve_auto_backend()};
  return b;
}

// Forwards every kernel to the active backend; gemm also appends its descriptor.
class RecordingKernels final : public Kernels {
 public:
  std::vector<GemmDesc>* recorded = nullptr;
  const Kernels& base() const { return kernels_for(current_backend()); }
  Backend backend() const override { return base().backend(); }
  void gemm(const GemmDesc& d, const float* a, const float* b, float* c) const override {
    recorded->push_back(d);
    base().gemm(d, a, b, c);
  }
  void softmax_forward(const float* x, float* y, int64_t rows, int64_t cols) const override {
    base().softmax_forward(x, y, rows, cols);
  }
  void softmax_backward(const float* y, const float* dy, float* dx, int64_t rows,
                        int64_t cols) const override {
    base().softmax_backward(y, dy, dx, rows, cols);
  }
  void log_softmax_forward(const float* x, float* y, int64_t rows, int64_t cols) const override {
    base().log_softmax_forward(x, y, rows, cols);
  }
  void log_softmax_backward(const float* y, const float* dy, float* dx, int64_t rows,
                            int64_t cols) const override {
    base().log_softmax_backward(y, dy, dx, rows, cols);
  }
  void layer_norm_forward(const float* x, const float* gamma, const float* beta, float* y,
                          float* mean, float* rstd, int64_t rows, int64_t cols,
                          float eps) const override {
    base().layer_norm_forward(x, gamma, beta, y, mean, rstd, rows, cols, eps);
  }
  void layer_norm_backward(const float* x, const float* gamma, const float* mean,
                           const float* rstd, const float* dy, float* dx, float* dgamma,
                           float* dbeta, int64_t rows, int64_t cols) const override {
    base().layer_norm_backward(x, gamma, mean, rstd, dy, dx, dgamma, dbeta, rows, cols);
  }
  void relu_forward(const float* x, float* y, int64_t n) const override {
    base().relu_forward(x, y, n);
  }
  void relu_backward(const float* x, const float* dy, float* dx, int64_t n) const override {
    base().relu_backward(x, dy, dx, n);
  }
  void gelu_forward(const float* x, float* y, int64_t n) const override {
    base().gelu_forward(x, y, n);
  }
  void gelu_backward(const float* x, const float* dy, float* dx, int64_t n) const override {
    base().gelu_backward(x, dy, dx, n);
  }
  void gemm_bias_act(const GemmDesc& d, const float* a, const float* b, const float* bias,
                     bool relu, float* c) const override {
    recorded->push_back(d);
    base().gemm_bias_act(d, a, b, bias, relu, c);
  }
  void bias_act_backward(const float* dy, const float* y, float* dz, float* db, int64_t rows,
                         int64_t cols) const override {
    base().bias_act_backward(dy, y, dz, db, rows, cols);
  }
  void add_layer_norm_forward(const float* x, const float* r, const float* gamma,
                              const float* beta, float* y, float* xhat, float* rstd, int64_t rows,
                              int64_t cols, float eps) const override {
    base().add_layer_norm_forward(x, r, gamma, beta, y, xhat, rstd, rows, cols, eps);
  }
  void add_layer_norm_backward(const float* xhat, const float* rstd, const float* gamma,
                               const float* dy, float* dx, bool accumulate_dx, float* dr,
                               bool accumulate_dr, float* dgamma, float* dbeta, int64_t rows,
                               int64_t cols) const override {
    base().add_layer_norm_backward(xhat, rstd, gamma, dy, dx, accumulate_dx, dr, accumulate_dr,
                                   dgamma, dbeta, rows, cols);
  }
  // The fused attention runs the products of the composed ops itself; the recording lists
  // those batched GEMMs, so the GEMM-only time stays the time of the same products.
  void attention_forward(const AttentionDesc& d, const float* qkv, float* p, float* p_drop,
                         float* out) const override {
    const int64_t t = d.len, n = d.dim, bh = d.batch * d.heads;
    recorded->push_back({.trans_b = true, .m = t, .n = t, .k = n, .alpha = d.scale, .batch = bh});
    recorded->push_back({.m = t, .n = n, .k = t, .batch = bh});
    base().attention_forward(d, qkv, p, p_drop, out);
  }
  void attention_backward(const AttentionDesc& d, const float* qkv, const float* p,
                          const float* p_drop, const float* dout, float* dqkv,
                          bool accumulate) const override {
    const int64_t t = d.len, n = d.dim, bh = d.batch * d.heads;
    recorded->push_back({.trans_b = true, .m = t, .n = t, .k = n, .batch = bh});                  // dP
    recorded->push_back({.trans_a = true, .m = t, .n = n, .k = t, .batch = bh});                  // dV
    recorded->push_back({.m = t, .n = n, .k = t, .alpha = d.scale, .batch = bh});                 // dQ
    recorded->push_back({.trans_a = true, .m = t, .n = n, .k = t, .alpha = d.scale, .batch = bh});  // dK
    base().attention_backward(d, qkv, p, p_drop, dout, dqkv, accumulate);
  }
};

RecordingKernels& recorder() {
  static RecordingKernels r;
  return r;
}
std::atomic<bool> g_recording{false};

}  // namespace

const char* backend_name(Backend b) {
  switch (b) {
    case Backend::reference: return "reference";
    case Backend::blas: return "blas";
    case Backend::onednn: return "onednn";
  }
  return "?";
}

Backend parse_backend(std::string_view name) {
  if (name == "reference") return Backend::reference;
  if (name == "blas") return Backend::blas;
  if (name == "onednn") return Backend::onednn;
  if (name == "auto") return resolve_auto_backend();
  fail("backend: unknown backend '{}' (known: auto, reference, blas, onednn)", name);
}

// auto = onednn, on every machine. Measured with `headlab bench --kernels` on the 2-core AMD
// EPYC (Zen 5, AVX-512) this project runs on, 1 thread, median of 5:
//  - matmul: oneDNN (AVX-512 brgemm) 1.9-2.3x faster than OpenBLAS 0.3.21 on every encoder
//    shape, e.g. 2048x64x64 200 vs 94 GFLOP/s, 1024x256x256 194 vs 93, 256 batches of
//    16x16x16 65 vs 39 (OpenBLAS picks its AVX2 Haswell kernels on this CPU, whose AVX2 FMA
//    peak is ~117 GFLOP/s per core against ~222 for AVX-512);
//  - softmax, LayerNorm and GELU, which the blas backend takes from the reference loops:
//    oneDNN 6-20x faster (softmax fwd 4096x16 70 vs 562 us, LayerNorm fwd 2048x64 45 vs 287 us,
//    GELU fwd 2048x256 238 vs 2418 us).
// The second point alone decides it on any CPU, so the rule does not look at the hardware.
Backend resolve_auto_backend() { return Backend::onednn; }

const Kernels& kernels_for(Backend b) {
  static const ReferenceKernels reference;
  static const BlasKernels blas;
  static const OneDnnKernels onednn;
  switch (b) {
    case Backend::reference: return reference;
    case Backend::blas: return blas;
    case Backend::onednn: return onednn;
  }
  return reference;
}

const Kernels& kernels() {
  if (g_recording.load(std::memory_order_relaxed)) [[unlikely]]
    return recorder();
  return kernels_for(active().load(std::memory_order_relaxed));
}

void record_gemms(std::vector<GemmDesc>* out) {
  recorder().recorded = out;
  g_recording.store(out != nullptr, std::memory_order_relaxed);
}
void set_backend(Backend b) { active().store(b, std::memory_order_relaxed); }
Backend current_backend() { return active().load(std::memory_order_relaxed); }

}  // namespace headlab
