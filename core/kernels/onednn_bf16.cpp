// The onednn flavour's products at Precision::bf16 (kernels.h): each operand is rounded to bf16
// into a per-thread buffer, packed in the layout it is stored in (a transposed operand stays a
// stride, as in onednn.cpp), and oneDNN's matmul primitive multiplies bf16 src and weights into
// an fp32 dst on the AVX512_BF16 dot-product instructions (its brgemm kernel for
// avx512_core_bf16), with alpha as the output scale, beta as a sum post-op, and the bias and ReLU
// of gemm_bias_act as the bias argument and an eltwise post-op. Entries are cached per shape and
// thread count like the fp32 ones (onednn_cache.h).
//
// Why oneDNN and not headlab's own GEMM (simd/gemm.h): its brgemm bf16 kernel already runs near
// the dot-product peak at these shapes; headlab's register blocks are fp32 FMA blocks.
//
// Determinism: the rounding is element-wise and the primitive's order of summation is fixed by
// its shape and thread count (both in the key), so the same call gives the same bits on every
// run at a thread count. Unlike headlab's fp32 GEMM, the bits may differ between thread counts
// (oneDNN may split a long k across threads).

#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/kernels/backends.h"
#include "core/kernels/fast.h"
#include "core/kernels/onednn_cache.h"

namespace headlab {
namespace {

using dnnl::memory;

constexpr uint32_t kBiasFlag = 1u << 8;
constexpr uint32_t kReluFlag = 1u << 9;

// fp32 -> bf16, round to nearest even (the conversion vcvtneps2bf16 and PyTorch's autocast
// make, but keeping subnormals); a NaN stays a (quiet) NaN.
HEADLAB_INLINE uint16_t round_bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// dst [rows, cols] packed = bf16(src [rows, cols], rows ld apart), rows shared among threads.
HEADLAB_AVX512_TARGET void to_bf16(const float* src, int64_t rows, int64_t cols, int64_t ld,
                                   uint16_t* dst) {
  const int nt = fast::threads_for(rows * cols);
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
  for (int64_t r = 0; r < rows; ++r) {
    const float* s = src + r * ld;
    uint16_t* o = dst + r * cols;
#pragma omp simd
    for (int64_t j = 0; j < cols; ++j) o[j] = round_bf16(s[j]);
  }
}

// One operand op(X) [rows, cols] of d, stored [rows, cols] or, transposed, [cols, rows] with
// row stride ld and batch items `stride` apart: rounded into buf, packed as stored.
struct Operand {
  int64_t stored_rows, stored_cols;
  memory::desc desc(int64_t batch, int64_t rows, int64_t cols, bool transposed) const {
    const memory::dims inner =
        transposed ? memory::dims{1, stored_cols} : memory::dims{stored_cols, 1};
    if (batch == 1) return memory::desc({rows, cols}, memory::data_type::bf16, inner);
    return memory::desc({batch, rows, cols}, memory::data_type::bf16,
                        {stored_rows * stored_cols, inner[0], inner[1]});
  }
};

const uint16_t* round_operand(const float* x, const Operand& o, int64_t ld, int64_t stride,
                              int64_t batch, std::vector<uint16_t>& buf) {
  const int64_t item = o.stored_rows * o.stored_cols;
  if (buf.size() < static_cast<size_t>(item * batch)) buf.resize(static_cast<size_t>(item * batch));
  for (int64_t bi = 0; bi < batch; ++bi)
    to_bf16(x + bi * stride, o.stored_rows, o.stored_cols, ld, buf.data() + bi * item);
  return buf.data();
}

}  // namespace

namespace detail {

void bf16_matmul(const GemmDesc& desc, const float* a, const float* b, const float* bias, bool relu,
                 float* c) {
  HEADLAB_ASSERT(bf16_supported());
  GemmDesc d = desc.resolved();
  if (d.m == 0 || d.n == 0 || d.batch == 0) return;
  if (d.k == 0) {  // no product: C = beta C, then act(C + bias)
    for (int64_t bi = 0; bi < d.batch; ++bi)
      for (int64_t i = 0; i < d.m; ++i) {
        float* row = c + bi * d.stride_c + i * d.ldc;
        for (int64_t j = 0; j < d.n; ++j) row[j] = d.beta == 0.0f ? 0.0f : d.beta * row[j];
      }
    if (bias || relu) reference_bias_act(c, d.m, d.n, d.ldc, bias, relu);
    return;
  }
  HEADLAB_ASSERT(!(bias || relu) || (d.batch == 1 && d.alpha == 1.0f && d.beta == 0.0f));
  if (d.batch == 1) d.stride_c = 0;  // irrelevant: share one entry
  const Operand oa{d.trans_a ? d.k : d.m, d.trans_a ? d.m : d.k};
  const Operand ob{d.trans_b ? d.n : d.k, d.trans_b ? d.k : d.n};

  onednn::Key key;
  key.op = onednn::Op::matmul_bf16;
  key.flags = (d.trans_a ? 1u : 0u) | (d.trans_b ? 2u : 0u) | (bias ? kBiasFlag : 0u) |
              (relu ? kReluFlag : 0u);
  key.f0 = d.alpha;
  key.f1 = d.beta;
  key.dims = {d.m, d.n, d.k, d.ldc, 0, 0, d.batch, d.stride_c, 0, 0};
  key.threads = onednn::threads_for(key);
  onednn::Entry& e = onednn::cached(key, [&](onednn::Entry& fresh) {
    const memory::desc ad = oa.desc(d.batch, d.m, d.k, d.trans_a);
    const memory::desc bd = ob.desc(d.batch, d.k, d.n, d.trans_b);
    const memory::desc cd = d.batch == 1
                                ? onednn::f32_desc({d.m, d.n}, {d.ldc, 1})
                                : onednn::f32_desc({d.batch, d.m, d.n}, {d.stride_c, d.ldc, 1});
    const memory::desc biasd = onednn::f32_desc({1, d.n});
    dnnl::primitive_attr attr = onednn::base_attr();
    if (d.alpha != 1.0f) attr.set_output_scales(0, {d.alpha});
    dnnl::post_ops ops;
    if (d.beta != 0.0f) ops.append_sum(d.beta);  // reads C only when present
    if (relu) ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
    attr.set_post_ops(ops);
    onednn::init_matmul(fresh, ad, bd, biasd, bias != nullptr, cd, attr);
  });
  // Per thread, grown to the largest operand seen: no allocation once a run's shapes are seen.
  thread_local std::vector<uint16_t> abuf, bbuf;
  const uint16_t* a16 = round_operand(a, oa, d.lda, d.stride_a, d.batch, abuf);
  const uint16_t* b16 = round_operand(b, ob, d.ldb, d.stride_b, d.batch, bbuf);
  if (bias)
    e.execute({a16, b16, bias, c});
  else
    e.execute({a16, b16, c});
}

}  // namespace detail

namespace {

bool detect_bf16() {
  __builtin_cpu_init();
  return fast::avx512_enabled() && __builtin_cpu_supports("avx512bf16");
}

}  // namespace

bool bf16_supported() {
  static const bool on = detect_bf16();
  return on;
}

}  // namespace headlab
