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

// oneDNN: its matmul measured faster than OpenBLAS on every encoder shape (see README).
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
