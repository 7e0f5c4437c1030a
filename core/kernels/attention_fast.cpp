// The fused attention of FastKernels (both fast backends; formulas at Kernels::attention_forward,
// layouts at AttentionDesc in kernels.h): per (batch item, head), straight from the packed
// projections, the products run as small register-blocked GEMMs on data that stays in L1
// (attention_gemm.h), the masked softmax runs on each score row in registers
// (attention_softmax.h), and the outputs are written in their final layouts (no head-major
// copies, no score round trips through memory beyond P, which backward needs). Two builds as in
// fast.cpp: AVX-512 intrinsics, and portable loops; heads are shared among OpenMP threads when
// there is enough work.
//
// The products, for Q, K, V [T, d] (rows 3 h d apart in qkv), P, P' [T, T], dO [T, d]:
//   S = Q K^T and dP' = dO V^T read K^T, V^T from a [d, T] transposed copy (B operands are
//   read by rows); P V, dS K, P'^T dO and dS^T Q read their A operand by scalar broadcasts, so
//   a transposed A (P'^T, dS^T) costs nothing.

#include <algorithm>

#include <omp.h>

#include "core/kernels/attention_gemm.h"
#include "core/kernels/attention_softmax.h"
#include "core/kernels/backends.h"
#include "core/kernels/fast.h"
#include "core/tensor.h"

namespace headlab::fast {
namespace {

// dst [cols, ld_dst] = src^T for src [rows, cols] with rows ld_src apart.
HEADLAB_INLINE void transpose(const float* __restrict src, int64_t ld_src, int64_t rows,
                              int64_t cols, float* __restrict dst, int64_t ld_dst) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) dst[c * ld_dst + r] = src[r * ld_src + c];
}

// ---- one (batch item, head)

struct Head {
  const AttentionDesc& d;
  int64_t b, i;
  int64_t ld() const { return 3 * d.heads * d.dim; }     // qkv row stride
  int64_t ldo() const { return d.heads * d.dim; }        // out / dout row stride
  int64_t bh() const { return b * d.heads + i; }
  int64_t q_off() const { return b * d.len * ld() + i * d.dim; }
  int64_t k_off() const { return q_off() + d.heads * d.dim; }
  int64_t v_off() const { return q_off() + 2 * d.heads * d.dim; }
  int64_t o_off() const { return b * d.len * ldo() + i * d.dim; }
};

// scratch: d.dim * d.len floats.
template <class Mm, class Row>
HEADLAB_INLINE void head_forward(const Head& h, const float* qkv, float* p, float* p_drop,
                                 float* out, float* scratch, Mm mm, Row row) {
  const AttentionDesc& d = h.d;
  const int64_t t = d.len, n = d.dim, ld = h.ld();
  float* pr = p + h.bh() * t * t;
  float* pd = d.dropout_mask ? p_drop + h.bh() * t * t : nullptr;
  transpose(qkv + h.k_off(), ld, t, n, scratch, t);                    // K^T [d, T]
  mm(qkv + h.q_off(), ld, 1, scratch, t, pr, t, t, t, n, d.scale, false);  // S = scale Q K^T
  for (int64_t r = 0; r < t; ++r)
    row(pr + r * t, pd ? pd + r * t : nullptr,
        d.dropout_mask ? d.dropout_mask + (h.bh() * t + r) * t : nullptr,
        d.key_padding_mask ? d.key_padding_mask + h.b * t : nullptr,
        d.attn_mask ? d.attn_mask + r * t : nullptr, t);
  mm(pd ? pd : pr, t, 1, qkv + h.v_off(), ld, out + h.o_off(), h.ldo(), t, n, t, 1.0f, false);
}

// scratch: d.dim * d.len + d.len * d.len floats.
template <class Mm>
HEADLAB_INLINE void head_backward(const Head& h, const float* qkv, const float* p,
                                  const float* p_drop, const float* dout, float* dqkv,
                                  bool accumulate, float* scratch, Mm mm) {
  const AttentionDesc& d = h.d;
  const int64_t t = d.len, n = d.dim, ld = h.ld();
  const float* pr = p + h.bh() * t * t;
  const float* pd = d.dropout_mask ? p_drop + h.bh() * t * t : pr;
  const float* mult = d.dropout_mask ? d.dropout_mask + h.bh() * t * t : nullptr;
  const float* d_o = dout + h.o_off();
  float* vt = scratch;
  float* ds = scratch + n * t;
  transpose(qkv + h.v_off(), ld, t, n, vt, t);                          // V^T [d, T]
  mm(d_o, h.ldo(), 1, vt, t, ds, t, t, t, n, 1.0f, false);              // dP' = dO V^T
  mm(pd, 1, t, d_o, h.ldo(), dqkv + h.v_off(), ld, t, n, t, 1.0f, accumulate);  // dV = P'^T dO
  for (int64_t r = 0; r < t; ++r) softmax_backward_body(pr, ds, mult, r, t);  // dS
  mm(ds, t, 1, qkv + h.k_off(), ld, dqkv + h.q_off(), ld, t, n, t, d.scale, accumulate);  // dQ
  mm(ds, 1, t, qkv + h.q_off(), ld, dqkv + h.k_off(), ld, t, n, t, d.scale, accumulate);  // dK
}

// The parallel loops live in the wrappers, so OpenMP's outlined bodies get the wrapper's ISA.
#define HEADLAB_DEFINE_BUILD(SUFFIX, ATTR, MM, ROW)                                               \
  ATTR void forward_##SUFFIX(const AttentionDesc& d, const float* qkv, float* p, float* p_drop,   \
                             float* out, float* scratch, int nt) {                                \
    const int64_t heads = d.batch * d.heads, per = d.dim * d.len;                                 \
    if (nt == 1) {                                                                                \
      for (int64_t x = 0; x < heads; ++x)                                                         \
        head_forward(Head{d, x / d.heads, x % d.heads}, qkv, p, p_drop, out, scratch, MM, ROW);   \
      return;                                                                                     \
    }                                                                                             \
    _Pragma("omp parallel for num_threads(nt) schedule(static)")                                  \
    for (int64_t x = 0; x < heads; ++x)                                                           \
      head_forward(Head{d, x / d.heads, x % d.heads}, qkv, p, p_drop, out,                        \
                   scratch + per * omp_get_thread_num(), MM, ROW);                                \
  }                                                                                               \
  ATTR void backward_##SUFFIX(const AttentionDesc& d, const float* qkv, const float* p,           \
                              const float* p_drop, const float* dout, float* dqkv,                \
                              bool accumulate, float* scratch, int nt) {                          \
    const int64_t heads = d.batch * d.heads, per = d.dim * d.len + d.len * d.len;                 \
    if (nt == 1) {                                                                                \
      for (int64_t x = 0; x < heads; ++x)                                                         \
        head_backward(Head{d, x / d.heads, x % d.heads}, qkv, p, p_drop, dout, dqkv, accumulate,  \
                      scratch, MM);                                                               \
      return;                                                                                     \
    }                                                                                             \
    _Pragma("omp parallel for num_threads(nt) schedule(static)")                                  \
    for (int64_t x = 0; x < heads; ++x)                                                           \
      head_backward(Head{d, x / d.heads, x % d.heads}, qkv, p, p_drop, dout, dqkv, accumulate,    \
                    scratch + per * omp_get_thread_num(), MM);                                    \
  }

HEADLAB_DEFINE_BUILD(avx512, HEADLAB_AVX512_TARGET, MmAvx512{}, RowAvx512{})
HEADLAB_DEFINE_BUILD(portable, , MmPortable{}, RowPortable{})

// Threads for the heads of one call: the products dominate (about 4 T^2 d flops per head and
// direction), counted in floats' worth of work as threads_for expects.
int heads_threads(const AttentionDesc& d) {
  return threads_for(d.batch * d.heads * d.len * d.len * d.dim / 4);
}

}  // namespace

}  // namespace headlab::fast

namespace headlab {

void FastKernels::attention_forward(const AttentionDesc& d, const float* qkv, float* p,
                                    float* p_drop, float* out) const {
  detail::observe_attention(d, false);
  if (d.batch == 0 || d.heads == 0 || d.len == 0) return;
  const int nt = fast::heads_threads(d);
  Tensor scratch = Tensor::empty({std::max<int64_t>(1, d.dim * d.len * nt)});
  if (fast::avx512_enabled())
    return fast::forward_avx512(d, qkv, p, p_drop, out, scratch.data(), nt);
  fast::forward_portable(d, qkv, p, p_drop, out, scratch.data(), nt);
}

void FastKernels::attention_backward(const AttentionDesc& d, const float* qkv, const float* p,
                                     const float* p_drop, const float* dout, float* dqkv,
                                     bool accumulate) const {
  detail::observe_attention(d, true);
  if (d.batch == 0 || d.heads == 0 || d.len == 0) return;
  const int nt = fast::heads_threads(d);
  Tensor scratch = Tensor::empty({std::max<int64_t>(1, (d.dim * d.len + d.len * d.len) * nt)});
  if (fast::avx512_enabled())
    return fast::backward_avx512(d, qkv, p, p_drop, dout, dqkv, accumulate, scratch.data(), nt);
  fast::backward_portable(d, qkv, p, p_drop, dout, dqkv, accumulate, scratch.data(), nt);
}

}  // namespace headlab
