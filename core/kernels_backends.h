#pragma once
// The concrete kernel backends (internal to core; use kernels() / kernels_for()).

#include "core/kernels.h"

namespace headlab {

class ReferenceKernels final : public Kernels {
 public:
  Backend backend() const override { return Backend::reference; }
};

class BlasKernels final : public Kernels {
 public:
  Backend backend() const override { return Backend::blas; }
  void gemm(const GemmDesc& d, const float* a, const float* b, float* c) const override;
};

class OneDnnKernels final : public Kernels {
 public:
  Backend backend() const override { return Backend::onednn; }
  void gemm(const GemmDesc& d, const float* a, const float* b, float* c) const override;
};

}  // namespace headlab
