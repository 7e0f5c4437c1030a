#pragma once
// Register blocks of the AVX-512 attention (attention_fast.cpp, internal) for rows of at most 64
// keys: R score rows are computed, masked and softmaxed while they sit in registers, so the
// latency of each row's two horizontal reductions overlaps the other rows' work (a row at a time,
// the softmax is latency-bound: a 17-key row costs as much as a 16 x 16 x 16 product).
//
//   scores_block<R, NV>   S = scale Q K^T for R query rows against NV vectors of keys, then
//                         P = softmax(S + masks) -> p, and P' = P * multipliers -> p_drop
//   dscores_block<R, NV>  dP' = dO V^T for R rows, then dS = P * (dP - rowsum(P * dP)) with
//                         dP = dP' * multipliers -> ds
//
// The transposed K (or V) is read as kt [d][16 NV], its lanes past T zero. The per-row
// arithmetic is softmax_row16's (attention_softmax.h) step for step, so a block gives the same
// bits as the row loop.

#include <algorithm>
#include <cstdint>

#include "core/kernels/simd/attention_softmax.h"

namespace headlab::fast {

// Which lanes of a head's key vectors hold keys (live) and which of those the key padding mask
// leaves open.
struct KeyLanes {
  int nv = 0;
  __mmask16 live[4] = {};
  __mmask16 open[4] = {};
};

HEADLAB_AVX512_TARGET HEADLAB_INLINE KeyLanes key_lanes(int64_t keys, const float* kpm) {
  KeyLanes k;
  k.nv = static_cast<int>((keys + 15) / 16);
  for (int v = 0; v < k.nv; ++v) {
    const int64_t left = keys - 16 * v;
    k.live[v] =
        left >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << left) - 1);
    k.open[v] = k.live[v];
    if (kpm)
      k.open[v] &=
          ~_mm512_mask_cmp_ps_mask(k.live[v], _mm512_maskz_loadu_ps(k.live[v], kpm + 16 * v),
                                   _mm512_setzero_ps(), _CMP_NEQ_UQ);
  }
  return k;
}

// acc[i][v] = alpha sum_p a[i * lda + p] kt[p * 16 NV + 16 v + lane], p in [0, d), in order.
template <int R, int NV>
HEADLAB_AVX512_TARGET HEADLAB_INLINE void row_block_product(const float* a, int64_t lda,
                                                            const float* kt, int64_t d, float alpha,
                                                            __m512 (&acc)[R][NV]) {
  for (int i = 0; i < R; ++i)
    for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_setzero_ps();
  for (int64_t p = 0; p < d; ++p) {
    __m512 b[NV];
    for (int v = 0; v < NV; ++v) b[v] = _mm512_loadu_ps(kt + p * 16 * NV + 16 * v);
    for (int i = 0; i < R; ++i) {
      const __m512 x = _mm512_set1_ps(a[i * lda + p]);
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_fmadd_ps(x, b[v], acc[i][v]);
    }
  }
  const __m512 al = _mm512_set1_ps(alpha);
  for (int i = 0; i < R; ++i)
    for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_mul_ps(acc[i][v], al);
}

// Rows r0 .. r0 + R of one head (p, p_drop, dm at row r0, rows `keys` apart; am at row r0 or
// null).
template <int R, int NV>
HEADLAB_AVX512_TARGET HEADLAB_INLINE void scores_block(const float* q, int64_t ldq, const float* kt,
                                                       int64_t d, float scale, const KeyLanes& kl,
                                                       const float* am, int64_t keys, float* p,
                                                       float* pd, const float* dm) {
  __m512 s[R][NV];
  row_block_product<R, NV>(q, ldq, kt, d, scale, s);
  const __m512 neg_inf = _mm512_set1_ps(kNegInf), zero = _mm512_setzero_ps();
  float mx[R];
  for (int i = 0; i < R; ++i) {
    __m512 m = neg_inf;
    for (int v = 0; v < NV; ++v) {
      __mmask16 open = kl.open[v];
      if (am)
        open &= ~_mm512_mask_cmp_ps_mask(kl.live[v],
                                         _mm512_maskz_loadu_ps(kl.live[v], am + i * keys + 16 * v),
                                         zero, _CMP_NEQ_UQ);
      s[i][v] = _mm512_mask_mov_ps(neg_inf, open, s[i][v]);
      m = _mm512_max_ps(m, s[i][v]);
    }
    mx[i] = reduce16<true>(m);
  }
  for (int i = 0; i < R; ++i) {
    float* pr = p + i * keys;
    float* pdr = pd ? pd + i * keys : nullptr;
    if (mx[i] == kNegInf) {  // every key masked: a zero row, never NaN
      for (int v = 0; v < NV; ++v) {
        _mm512_mask_storeu_ps(pr + 16 * v, kl.live[v], zero);
        if (pdr) _mm512_mask_storeu_ps(pdr + 16 * v, kl.live[v], zero);
      }
      continue;
    }
    const __m512 mv = _mm512_set1_ps(mx[i]);
    __m512 sum = zero;
    for (int v = 0; v < NV; ++v) {
      s[i][v] = exp16(_mm512_sub_ps(s[i][v], mv));
      sum = _mm512_add_ps(sum, s[i][v]);
    }
    const __m512 inv = _mm512_set1_ps(1.0f / reduce16<false>(sum));
    for (int v = 0; v < NV; ++v) {
      const __m512 pv = _mm512_mul_ps(s[i][v], inv);
      _mm512_mask_storeu_ps(pr + 16 * v, kl.live[v], pv);
      if (pdr)
        _mm512_mask_storeu_ps(
            pdr + 16 * v, kl.live[v],
            _mm512_mul_ps(pv, _mm512_maskz_loadu_ps(kl.live[v], dm + i * keys + 16 * v)));
    }
  }
}

// Rows r0 .. r0 + R of dS (dout at row r0 with rows ldo apart; p, mult and ds at row r0, rows
// `keys` apart; mult null without dropout).
template <int R, int NV>
HEADLAB_AVX512_TARGET HEADLAB_INLINE void dscores_block(const float* dout, int64_t ldo,
                                                        const float* vt, int64_t d,
                                                        const KeyLanes& kl, int64_t keys,
                                                        const float* p, const float* mult,
                                                        float* ds) {
  __m512 g[R][NV];
  row_block_product<R, NV>(dout, ldo, vt, d, 1.0f, g);
  for (int i = 0; i < R; ++i) {
    __m512 dot = _mm512_setzero_ps();
    __m512 pv[NV];
    for (int v = 0; v < NV; ++v) {
      pv[v] = _mm512_maskz_loadu_ps(kl.live[v], p + i * keys + 16 * v);
      if (mult)
        g[i][v] =
            _mm512_mul_ps(g[i][v], _mm512_maskz_loadu_ps(kl.live[v], mult + i * keys + 16 * v));
      dot = _mm512_fmadd_ps(pv[v], g[i][v], dot);
    }
    const __m512 dv = _mm512_set1_ps(reduce16<false>(dot));
    for (int v = 0; v < NV; ++v)
      _mm512_mask_storeu_ps(ds + i * keys + 16 * v, kl.live[v],
                            _mm512_mul_ps(pv[v], _mm512_sub_ps(g[i][v], dv)));
  }
}

// ---- transposes: dst [cols][width] = src^T for src [rows, cols] (rows ld apart, cols <= 64),
// lanes [rows, width) of dst zero; width = 16 NV >= rows. In 16 x 16 tiles held in registers.

HEADLAB_AVX512_TARGET HEADLAB_INLINE void transpose_to_lanes(const float* src, int64_t ld,
                                                             int64_t rows, int64_t cols, float* dst,
                                                             int64_t width) {
  for (int64_t r0 = 0; r0 < width; r0 += 16)
    for (int64_t c0 = 0; c0 < cols; c0 += 16) {
      const int64_t nc = std::min<int64_t>(16, cols - c0);
      const __mmask16 cm = static_cast<__mmask16>((1u << nc) - 1);
      __m512 t[16];
      for (int i = 0; i < 16; ++i)
        t[i] = r0 + i < rows ? _mm512_maskz_loadu_ps(cm, src + (r0 + i) * ld + c0)
                             : _mm512_setzero_ps();
      transpose16(t);
      for (int64_t c = 0; c < nc; ++c) _mm512_storeu_ps(dst + (c0 + c) * width + r0, t[c]);
    }
}

// Rows per block: NV vectors per row, R rows in flight.
template <int NV>
inline constexpr int kScoreRows = NV <= 2 ? 8 : 4;

}  // namespace headlab::fast
