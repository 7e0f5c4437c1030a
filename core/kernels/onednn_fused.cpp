// gemm_bias_act on oneDNN (where headlab's own GEMM, gemm.h, does not run): one matmul primitive with the bias as its bias argument and ReLU as
// an eltwise post-op, so the epilogue costs no pass over C. Cached per shape like the flavour's
// other primitives (onednn_cache.h); the key's flag bits 8 and 9 keep these entries apart from
// the plain matmul's (which uses bits 0 and 1 for the transposes).

#include "core/kernels/backends.h"
#include "core/kernels/onednn_cache.h"
#include "core/kernels/simd/gemm.h"

namespace headlab {

namespace {

using dnnl::memory;

constexpr uint32_t kBiasFlag = 1u << 8;
constexpr uint32_t kReluFlag = 1u << 9;

// op(X) of a row-major matrix stored with row stride ld: the transposed view has strides (1, ld).
memory::desc operand_desc(int64_t rows, int64_t cols, bool transposed, int64_t ld) {
  return onednn::f32_desc({rows, cols}, transposed ? memory::dims{1, ld} : memory::dims{ld, 1});
}

}  // namespace

void OneDnnKernels::linear_backward(const float* g, const float* y, const float* x, const float* w,
                                    int64_t rows, int64_t in, int64_t out,
                                    const LinearGrads& grads) const {
  // The bias gradient comes from dW's packing of g: without dW (or with an empty product, which
  // packs nothing) the default computes it.
  const bool empty = rows == 0 || in == 0 || out == 0;
  if (current_precision() != Precision::bf16 || (grads.db && (!grads.dw || empty)))
    return Kernels::linear_backward(g, y, x, w, rows, in, out, grads);
  if (grads.dx) {  // dx = (g * mask) W: g rounded and masked as rows of pairs
    const GemmDesc d = linear_dx_desc(rows, in, out, grads.accumulate_dx);
    detail::observe_gemm(d);
    fast::gemm_bf16(d, g, w, grads.dx, nullptr, false, {.mask = y});
  }
  if (grads.dw) {  // dW = (g * mask)^T x, and db the sums of its A's rows, g's columns
    const GemmDesc d = linear_dw_desc(rows, in, out, grads.accumulate_dw);
    detail::observe_gemm(d);
    fast::gemm_bf16(d, g, x, grads.dw, nullptr, false, {.mask = y, .row_sums = grads.db});
  }
}

void OneDnnKernels::matmul_bias_act(const GemmDesc& desc, const float* a, const float* b,
                                    const float* bias, bool relu, float* c) const {
  if (current_precision() == Precision::bf16) return fast::gemm_bf16(desc, a, b, c, bias, relu);
  if (fast::own_gemm_available()) return fast::gemm(desc, a, b, c, bias, relu);
  const GemmDesc d = desc.resolved();
  if (d.m == 0 || d.n == 0) return;
  if (d.k == 0) {  // C = act(bias): the product is empty
    for (int64_t i = 0; i < d.m; ++i)
      for (int64_t j = 0; j < d.n; ++j) {
        const float v = bias ? bias[j] : 0.0f;
        c[i * d.ldc + j] = relu && v < 0.0f ? 0.0f : v;
      }
    return;
  }
  onednn::Key key;
  key.op = onednn::Op::matmul;
  key.flags = (d.trans_a ? 1u : 0u) | (d.trans_b ? 2u : 0u) | (bias ? kBiasFlag : 0u) |
              (relu ? kReluFlag : 0u);
  key.f0 = 1.0f;
  key.dims = {d.m, d.n, d.k, d.lda, d.ldb, d.ldc, 1, 0, 0, 0};
  key.threads = onednn::threads_for(key);
  onednn::Entry& e = onednn::cached(key, [&](onednn::Entry& fresh) {
    const memory::desc ad = operand_desc(d.m, d.k, d.trans_a, d.lda);
    const memory::desc bd = operand_desc(d.k, d.n, d.trans_b, d.ldb);
    const memory::desc cd = operand_desc(d.m, d.n, false, d.ldc);
    const memory::desc biasd = onednn::f32_desc({1, d.n});
    dnnl::primitive_attr attr = onednn::base_attr();
    if (relu) {
      dnnl::post_ops ops;
      ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
      attr.set_post_ops(ops);
    }
    onednn::init_matmul(fresh, ad, bd, biasd, bias != nullptr, cd, attr);
  });
  if (bias)
    e.execute({a, b, bias, c});
  else
    e.execute({a, b, c});
}

}  // namespace headlab
