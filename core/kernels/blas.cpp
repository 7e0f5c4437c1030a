// OpenBLAS backend: cblas_sgemm for matrix products; everything else from the reference.

#include <cblas.h>

#include "core/kernels/backends.h"

namespace headlab {

void BlasKernels::gemm(const GemmDesc& desc, const float* a, const float* b, float* c) const {
  const GemmDesc d = desc.resolved();
  if (d.m == 0 || d.n == 0) return;
  for (int64_t i = 0; i < d.batch; ++i) {
    cblas_sgemm(CblasRowMajor, d.trans_a ? CblasTrans : CblasNoTrans,
                d.trans_b ? CblasTrans : CblasNoTrans, static_cast<blasint>(d.m),
                static_cast<blasint>(d.n), static_cast<blasint>(d.k), d.alpha,
                a + i * d.stride_a, static_cast<blasint>(d.lda), b + i * d.stride_b,
                static_cast<blasint>(d.ldb), d.beta, c + i * d.stride_c,
                static_cast<blasint>(d.ldc));
  }
}

}  // namespace headlab
