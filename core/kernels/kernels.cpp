#include "core/kernels/kernels.h"

#include <atomic>

#include "core/error.h"
#include "core/kernels/backends.h"

namespace headlab {

namespace detail {

std::atomic<GemmObserver*> g_gemm_observer{nullptr};

void notify_attention_gemms(GemmObserver& o, const AttentionDesc& d, bool backward) {
  for (const GemmDesc& g : attention_gemms(d, backward)) o.on_gemm(g);
}

}  // namespace detail

namespace {

std::atomic<Precision>& active_precision() {
  static std::atomic<Precision> p{Precision::fp32};
  return p;
}

std::atomic<Backend>& active() {
  static std::atomic<Backend> b{resolve_auto_backend()};
  return b;
}

}  // namespace

GemmDesc GemmDesc::resolved() const {
  GemmDesc d = *this;
  if (d.lda == 0) d.lda = d.trans_a ? d.m : d.k;
  if (d.ldb == 0) d.ldb = d.trans_b ? d.k : d.n;
  if (d.ldc == 0) d.ldc = d.n;
  if (d.stride_a == 0) d.stride_a = d.m * d.k;
  if (d.stride_b == 0) d.stride_b = d.k * d.n;
  if (d.stride_c == 0) d.stride_c = d.m * d.n;
  return d;
}

std::vector<GemmDesc> attention_gemms(const AttentionDesc& d, bool backward) {
  const int64_t t = d.len, n = d.dim, bh = d.batch * d.heads;
  if (!backward)
    return {
        {.trans_b = true, .m = t, .n = t, .k = n, .alpha = d.scale, .batch = bh},  // S = s Q K^T
        {.m = t, .n = n, .k = t, .batch = bh},                                     // O = P' V
    };
  return {
      {.trans_b = true, .m = t, .n = t, .k = n, .batch = bh},                    // dP' = dO V^T
      {.trans_a = true, .m = t, .n = n, .k = t, .batch = bh},                    // dV = P'^T dO
      {.m = t, .n = n, .k = t, .alpha = d.scale, .batch = bh},                   // dQ = s dS K
      {.trans_a = true, .m = t, .n = n, .k = t, .alpha = d.scale, .batch = bh},  // dK = s dS^T Q
  };
}

const char* backend_name(Backend b) {
  switch (b) {
    case Backend::reference:
      return "reference";
    case Backend::blas:
      return "blas";
    case Backend::onednn:
      return "onednn";
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

// auto = onednn on every machine: the blas backend takes softmax, LayerNorm and the activations
// from the reference loops, which oneDNN's primitives beat several times over on any CPU (and
// its matmul is faster than OpenBLAS's on the AVX-512 machines measured). Measure a machine with
// `headlab bench --kernels`.
Backend resolve_auto_backend() {
  return Backend::onednn;
}

const Kernels& kernels_for(Backend b) {
  static const ReferenceKernels reference;
  static const BlasKernels blas;
  static const OneDnnKernels onednn;
  switch (b) {
    case Backend::reference:
      return reference;
    case Backend::blas:
      return blas;
    case Backend::onednn:
      return onednn;
  }
  return reference;
}

const Kernels& kernels() {
  return kernels_for(active().load(std::memory_order_relaxed));
}

void set_backend(Backend b) {
  active().store(b, std::memory_order_relaxed);
}
Backend current_backend() {
  return active().load(std::memory_order_relaxed);
}

const char* precision_name(Precision p) {
  return p == Precision::bf16 ? "bf16" : "fp32";
}

void set_precision(Precision p) {
  if (p == Precision::bf16 && !bf16_supported())
    fail("precision: bf16 needs a CPU with the AVX512_BF16 instructions, which this one lacks");
  active_precision().store(p, std::memory_order_relaxed);
}

Precision current_precision() {
  return active_precision().load(std::memory_order_relaxed);
}

void set_gemm_observer(GemmObserver* observer) {
  detail::g_gemm_observer.store(observer, std::memory_order_relaxed);
}

}  // namespace headlab
