// The fused attention kernels of the blas and onednn backends (see Kernels::attention_forward):
// per (batch item, head), straight from the packed [B, T, 3, h, d] projections, the products run
// as small register-blocked GEMMs on data that stays in L1, the masked softmax runs on each
// score row in registers, and the outputs are written in their final layouts (no head-major
// copies, no score round trips through memory beyond P, which backward needs). Two builds as in
// fast.cpp: AVX-512 intrinsics, and portable loops; heads are shared among OpenMP
// threads when there is enough work.
//
// The products, for Q, K, V [T, d] (rows 3 h d apart in qkv), P, P' [T, T], dO [T, d]:
//   S = Q K^T and dP' = dO V^T read K^T, V^T from a [d, T] transposed copy (B operands are
//   read by rows); P V, dS K, P'^T dO and dS^T Q read their A operand by scalar broadcasts, so
//   a transposed A (P'^T, dS^T) costs nothing.
//
// exp is computed here rather than by libm so the row loops vectorize: exp(x) = 2^n exp(r) with
// n = round(x log2(e)) and r = x - n ln(2) in two parts (Cody and Waite), exp(r) by Cephes'
// degree-7 polynomial for |r| <= ln(2)/2 (relative error about 1 ulp). Inputs below -87.33
// (including -inf, a masked key) give 0; softmax subtracts the row maximum, so no input is
// large.

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include <omp.h>

// GCC 12's AVX-512 intrinsics pass an undefined vector as the unused merge source of masked
// builtins, which trips -Wmaybe-uninitialized at every use (GCC bug 105593): the header's lines
// are exempt.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include "core/kernels/fast.h"
#include "core/kernels/kernels.h"
#include "core/tensor.h"

namespace headlab::fast {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

HEADLAB_INLINE float exp_approx(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  constexpr float kLow = -87.33f, kHigh = 88.37f;
  const float xc = x < kLow ? kLow : (x > kHigh ? kHigh : x);
  const float n = (xc * kLog2e + kRound) - kRound;
  float r = xc - n * kLn2Hi;
  r = r - n * kLn2Lo;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float e = p * r * r + r + 1.0f;
  const float scale = std::bit_cast<float>((static_cast<int32_t>(n) + 127) << 23);
  return x < kLow ? 0.0f : e * scale;
}

// One row of scores -> probabilities, in place (see Kernels::attention_softmax_forward).
HEADLAB_INLINE void softmax_row(float* __restrict s, float* __restrict pd,
                                const float* __restrict dm, const float* __restrict kpm,
                                const float* __restrict am, int64_t keys) {
  float mx = kNegInf;
  if (kpm || am) {
#pragma omp simd reduction(max : mx)
    for (int64_t j = 0; j < keys; ++j) {
      const bool masked = (kpm && kpm[j] != 0.0f) || (am && am[j] != 0.0f);
      const float v = masked ? kNegInf : s[j];
      s[j] = v;
      mx = v > mx ? v : mx;
    }
  } else {
#pragma omp simd reduction(max : mx)
    for (int64_t j = 0; j < keys; ++j) mx = s[j] > mx ? s[j] : mx;
  }
  if (mx == kNegInf) {  // every key masked: a zero row, never NaN
    std::fill_n(s, keys, 0.0f);
    if (pd) std::fill_n(pd, keys, 0.0f);
    return;
  }
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < keys; ++j) {
    const float e = exp_approx(s[j] - mx);
    s[j] = e;
    sum += e;
  }
  const float inv = 1.0f / sum;
  if (pd) {
#pragma omp simd
    for (int64_t j = 0; j < keys; ++j) {
      const float p = s[j] * inv;
      s[j] = p;
      pd[j] = p * dm[j];
    }
  } else {
#pragma omp simd
    for (int64_t j = 0; j < keys; ++j) s[j] *= inv;
  }
}

// exp_approx on 16 lanes: the same steps, with scalef applying 2^n.
HEADLAB_AVX512_TARGET HEADLAB_INLINE __m512 exp16(__m512 x) {
  const __m512 xc = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.33f)),
                                  _mm512_set1_ps(88.37f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), xc);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  const __m512 e = _mm512_fmadd_ps(_mm512_mul_ps(p, r), r, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  const __mmask16 low = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.33f), _CMP_LT_OQ);
  return _mm512_maskz_mov_ps(static_cast<__mmask16>(~low), _mm512_scalef_ps(e, n));
}

// Horizontal max and sum of 16 lanes by in-register shuffles (GCC 12's _mm512_reduce_* draw a
// -Wmaybe-uninitialized false positive).
HEADLAB_AVX512_TARGET HEADLAB_INLINE float hmax16(__m512 v) {
  v = _mm512_max_ps(v, _mm512_shuffle_f32x4(v, v, _MM_SHUFFLE(1, 0, 3, 2)));
  v = _mm512_max_ps(v, _mm512_shuffle_f32x4(v, v, _MM_SHUFFLE(2, 3, 0, 1)));
  v = _mm512_max_ps(v, _mm512_permute_ps(v, _MM_SHUFFLE(1, 0, 3, 2)));
  v = _mm512_max_ps(v, _mm512_permute_ps(v, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm512_cvtss_f32(v);
}
HEADLAB_AVX512_TARGET HEADLAB_INLINE float hsum16(__m512 v) {
  v = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, _MM_SHUFFLE(1, 0, 3, 2)));
  v = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, _MM_SHUFFLE(2, 3, 0, 1)));
  v = _mm512_add_ps(v, _mm512_permute_ps(v, _MM_SHUFFLE(1, 0, 3, 2)));
  v = _mm512_add_ps(v, _mm512_permute_ps(v, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm512_cvtss_f32(v);
}

// softmax_row for rows of at most 64 keys, held in four registers (lanes past `keys` hold -inf
// and are never stored).
HEADLAB_AVX512_TARGET HEADLAB_INLINE void softmax_row16(float* s, float* pd, const float* dm,
                                                const float* kpm, const float* am, int64_t keys) {
  const __m512 neg_inf = _mm512_set1_ps(kNegInf), zero = _mm512_setzero_ps();
  const int nv = static_cast<int>((keys + 15) / 16);
  __m512 v[4];
  __mmask16 live[4];
  __m512 mx = neg_inf;
  for (int i = 0; i < nv; ++i) {
    const int64_t left = keys - 16 * i;
    live[i] = left >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << left) - 1);
    v[i] = _mm512_mask_loadu_ps(neg_inf, live[i], s + 16 * i);
    __mmask16 masked = 0;
    if (kpm)
      masked |= _mm512_mask_cmp_ps_mask(live[i], _mm512_maskz_loadu_ps(live[i], kpm + 16 * i),
                                        zero, _CMP_NEQ_UQ);
    if (am)
      masked |= _mm512_mask_cmp_ps_mask(live[i], _mm512_maskz_loadu_ps(live[i], am + 16 * i),
                                        zero, _CMP_NEQ_UQ);
    v[i] = _mm512_mask_mov_ps(v[i], masked, neg_inf);
    mx = _mm512_max_ps(mx, v[i]);
  }
  const float m = hmax16(mx);
  if (m == kNegInf) {  // every key masked: a zero row, never NaN
    for (int i = 0; i < nv; ++i) {
      _mm512_mask_storeu_ps(s + 16 * i, live[i], zero);
      if (pd) _mm512_mask_storeu_ps(pd + 16 * i, live[i], zero);
    }
    return;
  }
  const __m512 mv = _mm512_set1_ps(m);
  __m512 sum = zero;
  for (int i = 0; i < nv; ++i) {
    v[i] = exp16(_mm512_sub_ps(v[i], mv));
    sum = _mm512_add_ps(sum, v[i]);
  }
  const __m512 inv = _mm512_set1_ps(1.0f / hsum16(sum));
  for (int i = 0; i < nv; ++i) {
    const __m512 p = _mm512_mul_ps(v[i], inv);
    _mm512_mask_storeu_ps(s + 16 * i, live[i], p);
    if (pd)
      _mm512_mask_storeu_ps(pd + 16 * i, live[i],
                            _mm512_mul_ps(p, _mm512_maskz_loadu_ps(live[i], dm + 16 * i)));
  }
}

HEADLAB_INLINE void softmax_backward_body(const float* p, float* dp, const float* dropout_mask,
                                          int64_t r, int64_t keys) {
  const float* __restrict pr = p + r * keys;
  float* __restrict g = dp + r * keys;
  const float* __restrict m = dropout_mask ? dropout_mask + r * keys : nullptr;
  float dot = 0.0f;
  if (m) {
#pragma omp simd reduction(+ : dot)
    for (int64_t j = 0; j < keys; ++j) {
      const float q = g[j] * m[j];
      g[j] = q;
      dot += pr[j] * q;
    }
  } else {
#pragma omp simd reduction(+ : dot)
    for (int64_t j = 0; j < keys; ++j) dot += pr[j] * g[j];
  }
#pragma omp simd
  for (int64_t j = 0; j < keys; ++j) g[j] = pr[j] * (g[j] - dot);
}


// ---- small GEMMs: C[M, N] (row stride ldc) = alpha sum_k A(r, k) B[k, :N] (+ C when
// accumulate), A(r, k) = a[r * ra + k * ka], B's rows ldb apart.

HEADLAB_INLINE void mm_portable(const float* a, int64_t ra, int64_t ka, const float* b,
                                int64_t ldb, float* c, int64_t ldc, int64_t m, int64_t n,
                                int64_t k, float alpha, bool accumulate) {
  for (int64_t r = 0; r < m; ++r) {
    float* __restrict cr = c + r * ldc;
    if (!accumulate) std::fill_n(cr, n, 0.0f);
    for (int64_t p = 0; p < k; ++p) {
      const float av = alpha * a[r * ra + p * ka];
      const float* __restrict br = b + p * ldb;
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) cr[j] += av * br[j];
    }
  }
}

// R rows by NV vectors of C in registers; the last vector's lanes are `tail`.
template <int R, int NV>
HEADLAB_AVX512_TARGET HEADLAB_INLINE void mm_block(
    const float* a, int64_t ra, int64_t ka, const float* b, int64_t ldb, float* c, int64_t ldc,
    int64_t k, __mmask16 tail, float alpha, bool accumulate) {
  __m512 acc[R][NV];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_setzero_ps();
  for (int64_t p = 0; p < k; ++p) {
    __m512 bv[NV];
    const float* br = b + p * ldb;
    for (int v = 0; v < NV; ++v)
      bv[v] = v + 1 < NV ? _mm512_loadu_ps(br + 16 * v) : _mm512_maskz_loadu_ps(tail, br + 16 * v);
    for (int r = 0; r < R; ++r) {
      const __m512 av = _mm512_set1_ps(a[r * ra + p * ka]);
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_fmadd_ps(av, bv[v], acc[r][v]);
    }
  }
  const __m512 al = _mm512_set1_ps(alpha);
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) {
      const __mmask16 m = v + 1 < NV ? static_cast<__mmask16>(0xffff) : tail;
      float* cp = c + r * ldc + 16 * v;
      __m512 x = _mm512_mul_ps(acc[r][v], al);
      if (accumulate) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(m, cp));
      _mm512_mask_storeu_ps(cp, m, x);
    }
}

template <int NV>
HEADLAB_AVX512_TARGET HEADLAB_INLINE void mm_rows(
    const float* a, int64_t ra, int64_t ka, const float* b, int64_t ldb, float* c, int64_t ldc,
    int64_t m, int64_t k, __mmask16 tail, float alpha, bool accumulate) {
  // Enough accumulators to cover the FMA latency: 8 with one vector per row, else 4 rows.
  constexpr int R = NV == 1 ? 8 : 4;
  int64_t r = 0;
  for (; r + R <= m; r += R)
    mm_block<R, NV>(a + r * ra, ra, ka, b, ldb, c + r * ldc, ldc, k, tail, alpha, accumulate);
  for (; r < m; ++r)
    mm_block<1, NV>(a + r * ra, ra, ka, b, ldb, c + r * ldc, ldc, k, tail, alpha, accumulate);
}

HEADLAB_AVX512_TARGET inline void mm_avx512(const float* a, int64_t ra, int64_t ka,
                                            const float* b, int64_t ldb, float* c, int64_t ldc,
                                            int64_t m, int64_t n, int64_t k, float alpha,
                                            bool accumulate) {
  for (int64_t j0 = 0; j0 < n; j0 += 64) {  // column blocks of up to four vectors
    const int64_t w = std::min<int64_t>(64, n - j0);
    const int nv = static_cast<int>((w + 15) / 16);
    const int64_t last = w - 16 * (nv - 1);
    const __mmask16 tail = static_cast<__mmask16>((1u << last) - 1);
    const float* bj = b + j0;
    float* cj = c + j0;
    switch (nv) {
      case 1: mm_rows<1>(a, ra, ka, bj, ldb, cj, ldc, m, k, tail, alpha, accumulate); break;
      case 2: mm_rows<2>(a, ra, ka, bj, ldb, cj, ldc, m, k, tail, alpha, accumulate); break;
      case 3: mm_rows<3>(a, ra, ka, bj, ldb, cj, ldc, m, k, tail, alpha, accumulate); break;
      default: mm_rows<4>(a, ra, ka, bj, ldb, cj, ldc, m, k, tail, alpha, accumulate); break;
    }
  }
}

struct MmAvx512 {
  HEADLAB_AVX512_TARGET void operator()(const float* a, int64_t ra, int64_t ka, const float* b,
                                        int64_t ldb, float* c, int64_t ldc, int64_t m, int64_t n,
                                        int64_t k, float alpha, bool accumulate) const {
    mm_avx512(a, ra, ka, b, ldb, c, ldc, m, n, k, alpha, accumulate);
  }
};
struct MmPortable {
  void operator()(const float* a, int64_t ra, int64_t ka, const float* b, int64_t ldb, float* c,
                  int64_t ldc, int64_t m, int64_t n, int64_t k, float alpha,
                  bool accumulate) const {
    mm_portable(a, ra, ka, b, ldb, c, ldc, m, n, k, alpha, accumulate);
  }
};

struct RowAvx512 {  // softmax of one score row
  HEADLAB_AVX512_TARGET void operator()(float* s, float* pd, const float* dm, const float* kpm,
                                        const float* am, int64_t keys) const {
    if (keys <= 64) return softmax_row16(s, pd, dm, kpm, am, keys);
    softmax_row(s, pd, dm, kpm, am, keys);
  }
};
struct RowPortable {
  void operator()(float* s, float* pd, const float* dm, const float* kpm, const float* am,
                  int64_t keys) const {
    softmax_row(s, pd, dm, kpm, am, keys);
  }
};

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

void attention_forward(const AttentionDesc& d, const float* qkv, float* p, float* p_drop,
                       float* out) {
  if (d.batch == 0 || d.heads == 0 || d.len == 0) return;
  const int nt = heads_threads(d);
  Tensor scratch = Tensor::empty({std::max<int64_t>(1, d.dim * d.len * nt)});
  if (avx512_enabled()) return forward_avx512(d, qkv, p, p_drop, out, scratch.data(), nt);
  forward_portable(d, qkv, p, p_drop, out, scratch.data(), nt);
}

void attention_backward(const AttentionDesc& d, const float* qkv, const float* p,
                        const float* p_drop, const float* dout, float* dqkv, bool accumulate) {
  if (d.batch == 0 || d.heads == 0 || d.len == 0) return;
  const int nt = heads_threads(d);
  Tensor scratch = Tensor::empty({std::max<int64_t>(1, (d.dim * d.len + d.len * d.len) * nt)});
  if (avx512_enabled())
    return backward_avx512(d, qkv, p, p_drop, dout, dqkv, accumulate, scratch.data(), nt);
  backward_portable(d, qkv, p, p_drop, dout, dqkv, accumulate, scratch.data(), nt);
}

}  // namespace headlab::fast
