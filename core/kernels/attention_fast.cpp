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

#include "core/kernels/backends.h"
#include "core/kernels/fast.h"
#include "core/kernels/simd/attention_blocks.h"
#include "core/kernels/simd/attention_gemm.h"
#include "core/kernels/simd/attention_softmax.h"
#include "core/tensor.h"

namespace headlab::fast {
namespace {

// Floats in one AVX-512 register. A transposed K or V ([d, T]) gets rows padded to whole
// registers, so the register blocks load their keys without masks (the padding lanes are zero);
// the scratch is sized for that padding in both builds.
constexpr int64_t kLanes = 16;
// The register blocks (attention_blocks.h) hold a score row in at most four registers: heads
// with more keys take the GEMM-and-row-loop path (head_forward, head_backward).
constexpr int64_t kMaxBlockVectors = 4;  // the switches in HeadsAvx512 cover 1 to 4
constexpr int64_t kMaxBlockKeys = kMaxBlockVectors * kLanes;

// T rounded up to whole registers: the padded row width of a transposed K or V.
constexpr int64_t lane_width(int64_t t) {
  return (t + kLanes - 1) / kLanes * kLanes;
}

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
  int64_t ld() const { return 3 * d.heads * d.dim; }  // qkv row stride
  int64_t ldo() const { return d.heads * d.dim; }     // out / dout row stride
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
  transpose(qkv + h.k_off(), ld, t, n, scratch, t);                        // K^T [d, T]
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
  transpose(qkv + h.v_off(), ld, t, n, vt, t);                                  // V^T [d, T]
  mm(d_o, h.ldo(), 1, vt, t, ds, t, t, t, n, 1.0f, false);                      // dP' = dO V^T
  mm(pd, 1, t, d_o, h.ldo(), dqkv + h.v_off(), ld, t, n, t, 1.0f, accumulate);  // dV = P'^T dO
  for (int64_t r = 0; r < t; ++r) softmax_backward_body(pr, ds, mult, r, t);    // dS
  mm(ds, t, 1, qkv + h.k_off(), ld, dqkv + h.q_off(), ld, t, n, t, d.scale, accumulate);  // dQ
  mm(ds, 1, t, qkv + h.q_off(), ld, dqkv + h.k_off(), ld, t, n, t, d.scale, accumulate);  // dK
}

// ---- prefetching: a head's rows of qkv are 3 h d floats apart, so its Q, K and V lines are
// spread over T rows (three lines per row for d = 16) that the hardware prefetchers, which follow
// streams within a page, mostly miss: each would be a demand miss from L3 or memory. The next
// head's lines are requested while this one computes.

// The lines of rows [0, rows) of `cols` floats each, rows `ld` apart.
HEADLAB_INLINE void prefetch_rows(const float* p, int64_t rows, int64_t cols, int64_t ld,
                                  bool write) {
  constexpr int64_t kLine = 16;  // floats per 64-byte cache line
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; c += kLine) {
      if (write)
        __builtin_prefetch(p + r * ld + c, 1, 3);
      else
        __builtin_prefetch(p + r * ld + c, 0, 3);
    }
}

// What head x reads in the forward (Q, K, V, the dropout multipliers) and writes (P, P', O).
HEADLAB_INLINE void prefetch_forward(const AttentionDesc& d, int64_t x, const float* qkv,
                                     const float* p, const float* p_drop, const float* out) {
  if (x >= d.batch * d.heads) return;
  const Head h{d, x / d.heads, x % d.heads};
  const int64_t tt = d.len * d.len;
  if (d.dropout_mask) prefetch_rows(d.dropout_mask + h.bh() * tt, 1, tt, 0, false);
  for (int part = 0; part < 3; ++part)
    prefetch_rows(qkv + h.q_off() + part * d.heads * d.dim, d.len, d.dim, h.ld(), false);
  prefetch_rows(p + h.bh() * tt, 1, tt, 0, true);
  if (d.dropout_mask) prefetch_rows(p_drop + h.bh() * tt, 1, tt, 0, true);
  prefetch_rows(out + h.o_off(), d.len, d.dim, h.ldo(), true);
}

// Heads ahead that are prefetched.
constexpr int64_t kAhead = 2;

// The backward's prefetches, issued before head x - kAhead computes: head x's rows of Q, K, V,
// dO and the dqkv lines it adds into, and the next head's P (with P' and the multipliers). The
// softmax step waits on P's lines (64 of a T = 32 head, more than all its rows); asked for last
// and only kAhead heads ahead, they came late (M: the backward 2.45 ms per step, 1.82 ms so).
HEADLAB_INLINE void prefetch_backward(const AttentionDesc& d, int64_t x, const float* qkv,
                                      const float* p, const float* p_drop, const float* dout,
                                      const float* dqkv) {
  if (x >= d.batch * d.heads) return;
  const Head h{d, x / d.heads, x % d.heads};
  const int64_t tt = d.len * d.len;
  if (x + 1 < d.batch * d.heads) {
    const Head h2{d, (x + 1) / d.heads, (x + 1) % d.heads};
    prefetch_rows(p + h2.bh() * tt, 1, tt, 0, false);
    if (d.dropout_mask) {
      prefetch_rows(p_drop + h2.bh() * tt, 1, tt, 0, false);
      prefetch_rows(d.dropout_mask + h2.bh() * tt, 1, tt, 0, false);
    }
  }
  prefetch_rows(dout + h.o_off(), d.len, d.dim, h.ldo(), false);
  for (int part = 0; part < 3; ++part)
    prefetch_rows(qkv + h.q_off() + part * d.heads * d.dim, d.len, d.dim, h.ld(), false);
  for (int part = 0; part < 3; ++part)
    prefetch_rows(dqkv + h.q_off() + part * d.heads * d.dim, d.len, d.dim, h.ld(), true);
}

// Floats of scratch per thread: K^T (forward) or V^T and dS (backward), rows padded to whole
// vectors for the register blocks.
int64_t scratch_per_head(const AttentionDesc& d, bool backward) {
  const int64_t width = lane_width(d.len);
  return d.dim * width + (backward ? d.len * d.len : 0);
}

// ---- the AVX-512 heads: rows of at most kMaxBlockKeys keys in register blocks
// (attention_blocks.h)

// Runs block.template operator()<N>(r) over rows r of [0, rows) in blocks of R (the last one
// shorter).
template <int R, class Block>
HEADLAB_INLINE void row_blocks(int64_t rows, Block&& block) {
  int64_t r = 0;
  for (; r + R <= rows; r += R) block.template operator()<R>(r);
  with_rows<R - 1>(rows - r, [&]<int N>() { block.template operator()<N>(r); });
}

template <int NV>
HEADLAB_AVX512_TARGET HEADLAB_INLINE void forward_blocks(const Head& h, const float* qkv, float* pr,
                                                         float* pd, const float* kt) {
  const AttentionDesc& d = h.d;
  const int64_t t = d.len, ld = h.ld();
  const float* q = qkv + h.q_off();
  const float* dm = d.dropout_mask ? d.dropout_mask + h.bh() * t * t : nullptr;
  const KeyLanes kl = key_lanes(t, d.key_padding_mask ? d.key_padding_mask + h.b * t : nullptr);
  row_blocks<kScoreRows<NV>>(t, [&]<int N>(int64_t r) HEADLAB_AVX512_TARGET {
    scores_block<N, NV>(q + r * ld, ld, kt, d.dim, d.scale, kl,
                        d.attn_mask ? d.attn_mask + r * t : nullptr, t, pr + r * t,
                        pd ? pd + r * t : nullptr, dm ? dm + r * t : nullptr);
  });
}

template <int NV>
HEADLAB_AVX512_TARGET HEADLAB_INLINE void backward_blocks(const Head& h, const float* dout,
                                                          const float* pr, const float* mult,
                                                          const float* vt, float* ds) {
  const AttentionDesc& d = h.d;
  const int64_t t = d.len;
  const KeyLanes kl = key_lanes(t, nullptr);  // masked keys have P = 0: dS is 0 there
  row_blocks<kScoreRows<NV>>(t, [&]<int N>(int64_t r) HEADLAB_AVX512_TARGET {
    dscores_block<N, NV>(dout + r * h.ldo(), h.ldo(), vt, d.dim, kl, t, pr + r * t,
                         mult ? mult + r * t : nullptr, ds + r * t);
  });
}

struct HeadsAvx512 {
  HEADLAB_AVX512_TARGET void forward(const Head& h, const float* qkv, float* p, float* p_drop,
                                     float* out, float* scratch) const {
    const AttentionDesc& d = h.d;
    const int64_t t = d.len, n = d.dim, ld = h.ld(), width = lane_width(t);
    if (t > kMaxBlockKeys)
      return head_forward(h, qkv, p, p_drop, out, scratch, MmAvx512{}, RowAvx512{});
    float* pr = p + h.bh() * t * t;
    float* pd = d.dropout_mask ? p_drop + h.bh() * t * t : nullptr;
    transpose_to_lanes(qkv + h.k_off(), ld, t, n, scratch, width);  // K^T [d, width]
    switch (width / kLanes) {
      case 1:
        forward_blocks<1>(h, qkv, pr, pd, scratch);
        break;
      case 2:
        forward_blocks<2>(h, qkv, pr, pd, scratch);
        break;
      case 3:
        forward_blocks<3>(h, qkv, pr, pd, scratch);
        break;
      default:
        forward_blocks<4>(h, qkv, pr, pd, scratch);
        break;
    }
    mm_avx512(pd ? pd : pr, t, 1, qkv + h.v_off(), ld, out + h.o_off(), h.ldo(), t, n, t, 1.0f,
              false);  // O = P' V
  }
  HEADLAB_AVX512_TARGET void backward(const Head& h, const float* qkv, const float* p,
                                      const float* p_drop, const float* dout, float* dqkv, bool acc,
                                      float* scratch) const {
    const AttentionDesc& d = h.d;
    const int64_t t = d.len, n = d.dim, ld = h.ld(), width = lane_width(t);
    if (t > kMaxBlockKeys)
      return head_backward(h, qkv, p, p_drop, dout, dqkv, acc, scratch, MmAvx512{});
    const float* pr = p + h.bh() * t * t;
    const float* pd = d.dropout_mask ? p_drop + h.bh() * t * t : pr;
    const float* mult = d.dropout_mask ? d.dropout_mask + h.bh() * t * t : nullptr;
    const float* d_o = dout + h.o_off();
    float* vt = scratch;
    float* ds = scratch + n * width;
    transpose_to_lanes(qkv + h.v_off(), ld, t, n, vt, width);  // V^T [d, width]
    switch (width / kLanes) {
      case 1:
        backward_blocks<1>(h, d_o, pr, mult, vt, ds);
        break;
      case 2:
        backward_blocks<2>(h, d_o, pr, mult, vt, ds);
        break;
      case 3:
        backward_blocks<3>(h, d_o, pr, mult, vt, ds);
        break;
      default:
        backward_blocks<4>(h, d_o, pr, mult, vt, ds);
        break;
    }
    mm_avx512(pd, 1, t, d_o, h.ldo(), dqkv + h.v_off(), ld, t, n, t, 1.0f, acc);  // dV = P'^T dO
    mm_avx512(ds, t, 1, qkv + h.k_off(), ld, dqkv + h.q_off(), ld, t, n, t, d.scale,
              acc);  // dQ = scale dS K
    mm_avx512(ds, 1, t, qkv + h.q_off(), ld, dqkv + h.k_off(), ld, t, n, t, d.scale,
              acc);  // dK = scale dS^T Q
  }
};

struct HeadsPortable {
  void forward(const Head& h, const float* qkv, float* p, float* p_drop, float* out,
               float* scratch) const {
    head_forward(h, qkv, p, p_drop, out, scratch, MmPortable{}, RowPortable{});
  }
  void backward(const Head& h, const float* qkv, const float* p, const float* p_drop,
                const float* dout, float* dqkv, bool acc, float* scratch) const {
    head_backward(h, qkv, p, p_drop, dout, dqkv, acc, scratch, MmPortable{});
  }
};

// The parallel loops live in the wrappers, so OpenMP's outlined bodies get the wrapper's ISA.
#define HEADLAB_DEFINE_BUILD(SUFFIX, ATTR, HEADS)                                                 \
  ATTR void forward_##SUFFIX(const AttentionDesc& d, const float* qkv, float* p, float* p_drop,   \
                             float* out, float* scratch, int nt) {                                \
    const int64_t heads = d.batch * d.heads, per = scratch_per_head(d, false);                    \
    if (nt == 1) {                                                                                \
      for (int64_t x = 0; x < heads; ++x) {                                                       \
        prefetch_forward(d, x + kAhead, qkv, p, p_drop, out);                                     \
        HEADS.forward(Head{d, x / d.heads, x % d.heads}, qkv, p, p_drop, out, scratch);           \
      }                                                                                           \
      return;                                                                                     \
    }                                                                                             \
    _Pragma("omp parallel for num_threads(nt) schedule(static)") for (int64_t x = 0; x < heads;   \
                                                                      ++x) {                      \
      prefetch_forward(d, x + kAhead, qkv, p, p_drop, out);                                       \
      HEADS.forward(Head{d, x / d.heads, x % d.heads}, qkv, p, p_drop, out,                       \
                    scratch + per * omp_get_thread_num());                                        \
    }                                                                                             \
  }                                                                                               \
  ATTR void backward_##SUFFIX(const AttentionDesc& d, const float* qkv, const float* p,           \
                              const float* p_drop, const float* dout, float* dqkv,                \
                              bool accumulate, float* scratch, int nt) {                          \
    const int64_t heads = d.batch * d.heads, per = scratch_per_head(d, true);                     \
    if (nt == 1) {                                                                                \
      for (int64_t x = 0; x < heads; ++x) {                                                       \
        prefetch_backward(d, x + kAhead, qkv, p, p_drop, dout, dqkv);                             \
        HEADS.backward(Head{d, x / d.heads, x % d.heads}, qkv, p, p_drop, dout, dqkv, accumulate, \
                       scratch);                                                                  \
      }                                                                                           \
      return;                                                                                     \
    }                                                                                             \
    _Pragma("omp parallel for num_threads(nt) schedule(static)") for (int64_t x = 0; x < heads;   \
                                                                      ++x) {                      \
      prefetch_backward(d, x + kAhead, qkv, p, p_drop, dout, dqkv);                               \
      HEADS.backward(Head{d, x / d.heads, x % d.heads}, qkv, p, p_drop, dout, dqkv, accumulate,   \
                     scratch + per * omp_get_thread_num());                                       \
    }                                                                                             \
  }

HEADLAB_DEFINE_BUILD(avx512, HEADLAB_AVX512_TARGET, HeadsAvx512{})
HEADLAB_DEFINE_BUILD(portable, , HeadsPortable{})

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
  Tensor scratch = Tensor::empty({std::max<int64_t>(1, fast::scratch_per_head(d, false) * nt)});
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
  Tensor scratch = Tensor::empty({std::max<int64_t>(1, fast::scratch_per_head(d, true) * nt)});
  if (fast::avx512_enabled())
    return fast::backward_avx512(d, qkv, p, p_drop, dout, dqkv, accumulate, scratch.data(), nt);
  fast::backward_portable(d, qkv, p, p_drop, dout, dqkv, accumulate, scratch.data(), nt);
}

}  // namespace headlab
