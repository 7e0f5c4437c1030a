#pragma once
// Small GEMMs of the fast attention (attention_fast.cpp, internal), on operands that stay in L1:
// register-blocked with AVX-512 (up to 8 rows by 4 vectors of C in registers), and portable.
// A is read by scalar broadcasts at any strides (so a transposed A costs nothing), B by rows.

#include <algorithm>
#include <bit>
#include <cstdint>
#include <limits>

#include "core/kernels/simd/avx512.h"

namespace headlab::fast {

// ---- small GEMMs: C[M, N] (row stride ldc) = alpha sum_k A(r, k) B[k, :N] (+ C when
// accumulate), A(r, k) = a[r * ra + k * ka], B's rows ldb apart.

HEADLAB_INLINE void mm_portable(const float* a, int64_t ra, int64_t ka, const float* b, int64_t ldb,
                                float* c, int64_t ldc, int64_t m, int64_t n, int64_t k, float alpha,
                                bool accumulate) {
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

// R rows by NV vectors of C in registers; the last vector's lanes are `tail`. Each C element
// is alpha times its sum over k in order (one FMA per k), then added to C when accumulating.
template <int R, int NV>
HEADLAB_AVX512_TARGET HEADLAB_INLINE void mm_block(const float* a, int64_t ra, int64_t ka,
                                                   const float* b, int64_t ldb, float* c,
                                                   int64_t ldc, int64_t k, __mmask16 tail,
                                                   float alpha, bool accumulate) {
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

// Rows per register block for NV vectors of C: enough independent accumulators to keep both FMA
// pipes busy through the FMA latency, few enough to stay in the 32 registers.
template <int NV>
inline constexpr int kBlockRows = NV == 1   ? 12
                                  : NV == 2 ? 8
                                  : NV == 3 ? 6
                                            : 4;

// Calls f.template operator()<N>() for N = n in [1, kMax]: a run-time count of rows to a
// template argument, so every remainder block keeps its accumulators in registers.
template <int kMax, class F>
HEADLAB_INLINE void with_rows(int64_t n, F&& f) {
  if constexpr (kMax >= 1) {
    if (n == kMax) return f.template operator()<kMax>();
    with_rows<kMax - 1>(n, f);
  }
}

template <int NV>
HEADLAB_AVX512_TARGET HEADLAB_INLINE void mm_rows(const float* a, int64_t ra, int64_t ka,
                                                  const float* b, int64_t ldb, float* c,
                                                  int64_t ldc, int64_t m, int64_t k, __mmask16 tail,
                                                  float alpha, bool accumulate) {
  constexpr int R = kBlockRows<NV>;
  int64_t r = 0;
  for (; r + R <= m; r += R)
    mm_block<R, NV>(a + r * ra, ra, ka, b, ldb, c + r * ldc, ldc, k, tail, alpha, accumulate);
  with_rows<R - 1>(m - r, [&]<int N>() HEADLAB_AVX512_TARGET {
    mm_block<N, NV>(a + r * ra, ra, ka, b, ldb, c + r * ldc, ldc, k, tail, alpha, accumulate);
  });
}

HEADLAB_AVX512_TARGET inline void mm_avx512(const float* a, int64_t ra, int64_t ka, const float* b,
                                            int64_t ldb, float* c, int64_t ldc, int64_t m,
                                            int64_t n, int64_t k, float alpha, bool accumulate) {
  for (int64_t j0 = 0; j0 < n; j0 += 64) {  // column blocks of up to four vectors
    const int64_t w = std::min<int64_t>(64, n - j0);
    const int nv = static_cast<int>((w + 15) / 16);
    const int64_t last = w - 16 * (nv - 1);
    const __mmask16 tail = static_cast<__mmask16>((1u << last) - 1);
    const float* bj = b + j0;
    float* cj = c + j0;
    switch (nv) {
      case 1:
        mm_rows<1>(a, ra, ka, bj, ldb, cj, ldc, m, k, tail, alpha, accumulate);
        break;
      case 2:
        mm_rows<2>(a, ra, ka, bj, ldb, cj, ldc, m, k, tail, alpha, accumulate);
        break;
      case 3:
        mm_rows<3>(a, ra, ka, bj, ldb, cj, ldc, m, k, tail, alpha, accumulate);
        break;
      default:
        mm_rows<4>(a, ra, ka, bj, ldb, cj, ldc, m, k, tail, alpha, accumulate);
        break;
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

}  // namespace headlab::fast
