// oneDNN backend (placeholder until the primitives land: falls back to the reference loops).
#include "core/kernels_backends.h"

namespace headlab {

void OneDnnKernels::gemm(const GemmDesc& d, const float* a, const float* b, float* c) const {
  Kernels::gemm(d, a, b, c);
}

}  // namespace headlab
