#pragma once
// The score rows of the fast attention (attention_fast.cpp, internal): the masked softmax of one
// row in place, forward (scalar-vectorized for any length, in four AVX-512 registers for up to 64
// keys) and backward, each in an AVX-512 and a portable build.
//
// exp is computed here rather than by libm so the row loops vectorize: exp(x) = 2^n exp(r) with
// n = round(x log2(e)) and r = x - n ln(2) in two parts (Cody and Waite), exp(r) by Cephes'
// degree-7 polynomial for |r| <= ln(2)/2 (relative error about 1 ulp). Inputs below -87.33
// (including -inf, a masked key) give 0; softmax subtracts the row maximum, so no input is
// large.

#include <algorithm>
#include <bit>
#include <cstdint>
#include <limits>

#include "core/kernels/simd/avx512.h"

namespace headlab::fast {

inline constexpr float kNegInf = -std::numeric_limits<float>::infinity();

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
  const __m512 xc =
      _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.33f)), _mm512_set1_ps(88.37f));
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

// Horizontal max (kMax) or sum of 16 lanes by in-register shuffles (GCC 12's _mm512_reduce_*
// draw a -Wmaybe-uninitialized false positive).
template <bool kMax>
HEADLAB_AVX512_TARGET HEADLAB_INLINE __m512 combine16(__m512 a, __m512 b) {
  if constexpr (kMax)
    return _mm512_max_ps(a, b);
  else
    return _mm512_add_ps(a, b);
}
template <bool kMax>
HEADLAB_AVX512_TARGET HEADLAB_INLINE float reduce16(__m512 v) {
  v = combine16<kMax>(v, _mm512_shuffle_f32x4(v, v, _MM_SHUFFLE(1, 0, 3, 2)));
  v = combine16<kMax>(v, _mm512_shuffle_f32x4(v, v, _MM_SHUFFLE(2, 3, 0, 1)));
  v = combine16<kMax>(v, _mm512_permute_ps(v, _MM_SHUFFLE(1, 0, 3, 2)));
  v = combine16<kMax>(v, _mm512_permute_ps(v, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm512_cvtss_f32(v);
}

// softmax_row for rows of at most 64 keys, held in four registers (lanes past `keys` hold -inf
// and are never stored).
HEADLAB_AVX512_TARGET HEADLAB_INLINE void softmax_row16(float* s, float* pd, const float* dm,
                                                        const float* kpm, const float* am,
                                                        int64_t keys) {
  const __m512 neg_inf = _mm512_set1_ps(kNegInf), zero = _mm512_setzero_ps();
  const int nv = static_cast<int>((keys + 15) / 16);
  __m512 v[4];
  __mmask16 live[4];
  __m512 mx = neg_inf;
  for (int i = 0; i < nv; ++i) {
    const int64_t left = keys - 16 * i;
    live[i] =
        left >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << left) - 1);
    v[i] = _mm512_mask_loadu_ps(neg_inf, live[i], s + 16 * i);
    __mmask16 masked = 0;
    if (kpm)
      masked |= _mm512_mask_cmp_ps_mask(live[i], _mm512_maskz_loadu_ps(live[i], kpm + 16 * i), zero,
                                        _CMP_NEQ_UQ);
    if (am)
      masked |= _mm512_mask_cmp_ps_mask(live[i], _mm512_maskz_loadu_ps(live[i], am + 16 * i), zero,
                                        _CMP_NEQ_UQ);
    v[i] = _mm512_mask_mov_ps(v[i], masked, neg_inf);
    mx = _mm512_max_ps(mx, v[i]);
  }
  const float m = reduce16<true>(mx);
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
  const __m512 inv = _mm512_set1_ps(1.0f / reduce16<false>(sum));
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
}  // namespace headlab::fast
