#pragma once
// What headlab's fp32 (gemm.cpp) and bf16 (gemm_bf16.cpp) matrix products share (internal to
// core): the epilogue that turns a register block's sums into C, the threads a product takes,
// and C = beta C for k == 0.

#include <algorithm>

#include "core/kernels/kernels.h"
#include "core/kernels/simd/avx512.h"
#include "core/threads.h"

namespace headlab::fast {

inline constexpr int kNr = 32;  // columns of a register block: two vectors

struct Epilogue {
  float alpha = 1.0f, beta = 0.0f;
  const float* bias = nullptr;  // at the block's first column
  bool relu = false;
};

// One vector of the C block: alpha acc (rounded once), + beta C, + bias, then ReLU.
template <bool kBeta, bool kBias, bool kRelu>
HEADLAB_AVX512_TARGET HEADLAB_INLINE __m512 finish(__m512 acc, __m512 alpha, __m512 beta,
                                                   __m512 bias, const float* c, __mmask16 m) {
  __m512 x = _mm512_mul_ps(acc, alpha);
  if constexpr (kBeta) x = _mm512_fmadd_ps(beta, _mm512_maskz_loadu_ps(m, c), x);
  if constexpr (kBias) x = _mm512_add_ps(x, bias);
  if constexpr (kRelu) x = _mm512_max_ps(x, _mm512_setzero_ps());
  return x;
}

// C block [rows <= R][cols <= 32] (rows ldc apart) = the epilogue of the sums acc.
template <int R, bool kBeta, bool kBias, bool kRelu>
HEADLAB_AVX512_TARGET HEADLAB_INLINE void store_block(const __m512 (&acc)[R][2], float* c,
                                                      int64_t ldc, int64_t rows, int64_t cols,
                                                      const Epilogue& e) {
  const __mmask16 m[2] = {lanes(cols), lanes(cols - 16)};
  const __m512 al = _mm512_set1_ps(e.alpha), be = _mm512_set1_ps(e.beta);
  __m512 bias[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
  if constexpr (kBias)
    for (int v = 0; v < 2; ++v) bias[v] = _mm512_maskz_loadu_ps(m[v], e.bias + 16 * v);
  const bool whole = rows == R && cols == kNr;  // plain stores
  for (int r = 0; r < R; ++r)
    if (r < rows)
      for (int v = 0; v < 2; ++v) {
        float* cp = c + r * ldc + 16 * v;
        const __m512 x = finish<kBeta, kBias, kRelu>(acc[r][v], al, be, bias[v], cp, m[v]);
        if (whole)
          _mm512_storeu_ps(cp, x);
        else
          _mm512_mask_storeu_ps(cp, m[v], x);
      }
}

// C = beta C (k == 0: no product to add).
inline void scale_only(const GemmDesc& d, float* c) {
  for (int64_t bi = 0; bi < d.batch; ++bi)
    for (int64_t i = 0; i < d.m; ++i) {
      float* row = c + bi * d.stride_c + i * d.ldc;
      for (int64_t j = 0; j < d.n; ++j) row[j] = d.beta == 0.0f ? 0.0f : d.beta * row[j];
    }
}

// Threads for a product of `flops`: a parallel region costs microseconds.
inline int gemm_threads(double flops) {
  constexpr double kMinFlopsPerThread = 2e6;
  const int nt = kernel_threads();
  return std::max(1, std::min(nt, static_cast<int>(flops / kMinFlopsPerThread)));
}

}  // namespace headlab::fast
