// Kernels::linear_backward's default: the composed form every backend starts from (the onednn
// backend's bf16 products fuse it: onednn_fused.cpp).

#include "core/kernels/kernels.h"
#include "core/tensor.h"

namespace headlab {

GemmDesc Kernels::linear_dx_desc(int64_t rows, int64_t in, int64_t out, bool accumulate) {
  // dx [rows, in] = dz [rows, out] W [out, in]
  return {.m = rows, .n = in, .k = out, .beta = accumulate ? 1.0f : 0.0f};
}

GemmDesc Kernels::linear_dw_desc(int64_t rows, int64_t in, int64_t out, bool accumulate) {
  // dW [out, in] = dz^T [out, rows] x [rows, in]
  return {.trans_a = true, .m = out, .n = in, .k = rows, .beta = accumulate ? 1.0f : 0.0f};
}

void Kernels::linear_backward(const float* g, const float* y, const float* x, const float* w,
                              int64_t rows, int64_t in, int64_t out,
                              const LinearGrads& grads) const {
  const float* dz = g;
  Tensor masked;
  if (y) {  // dz = g * (y > 0), a pooled temporary (with db in the same pass)
    masked = Tensor::empty({rows, out});
    bias_act_backward(g, y, masked.data(), grads.db, rows, out);
    dz = masked.data();
  } else if (grads.db) {
    bias_act_backward(g, nullptr, nullptr, grads.db, rows, out);
  }
  if (grads.dx) gemm(linear_dx_desc(rows, in, out, grads.accumulate_dx), dz, w, grads.dx);
  if (grads.dw) gemm(linear_dw_desc(rows, in, out, grads.accumulate_dw), dz, x, grads.dw);
}

}  // namespace headlab
