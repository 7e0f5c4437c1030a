#include "core/kernels.h"

#include <atomic>

#include "core/error.h"
#include "core/kernels_backends.h"

namespace headlab {
namespace {

std::atomic<Backend>& active() {
  static std::atomic<Backend> b{resolve_auto_backend()};
  return b;
}

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

const Kernels& kernels() { return kernels_for(active().load(std::memory_order_relaxed)); }
void set_backend(Backend b) { active().store(b, std::memory_order_relaxed); }
Backend current_backend() { return active().load(std::memory_order_relaxed); }

}  // namespace headlab
