#pragma once
// AVX-512 intrinsics for the fast kernels (internal to core), and the register transpose that
// several of them share. Functions here carry HEADLAB_AVX512_TARGET: call them only from code
// built for it, where fast::avx512_enabled() holds.

// GCC 12's AVX-512 intrinsics pass an undefined vector as the unused merge source of masked
// builtins, which trips -Wmaybe-uninitialized (and, for the shuffles, -Wuninitialized) at every
// use (GCC bug 105593): the header's lines are exempt (clang has no such warning).
#ifndef __clang__
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>
#ifndef __clang__
#pragma GCC diagnostic pop
#endif

#include "core/kernels/fast.h"

namespace headlab::fast {

HEADLAB_AVX512_TARGET HEADLAB_INLINE __m512 unpack_pd(__m512 a, __m512 b, bool hi) {
  const __m512d x = _mm512_castps_pd(a), y = _mm512_castps_pd(b);
  return _mm512_castpd_ps(hi ? _mm512_unpackhi_pd(x, y) : _mm512_unpacklo_pd(x, y));
}

// r[0..16) rows of a 16 x 16 tile -> r[0..16) its columns.
HEADLAB_AVX512_TARGET HEADLAB_INLINE void transpose16(__m512 (&r)[16]) {
  __m512 t[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {  // groups of four rows
    r[4 * i] = unpack_pd(t[4 * i], t[4 * i + 2], false);
    r[4 * i + 1] = unpack_pd(t[4 * i], t[4 * i + 2], true);
    r[4 * i + 2] = unpack_pd(t[4 * i + 1], t[4 * i + 3], false);
    r[4 * i + 3] = unpack_pd(t[4 * i + 1], t[4 * i + 3], true);
  }
  for (int i = 0; i < 4; ++i) {  // 128-bit lanes: rows 0-7 and 8-15 separately
    t[i] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0x88);
    t[i + 4] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0xdd);
    t[i + 8] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0x88);
    t[i + 12] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0xdd);
  }
  for (int i = 0; i < 8; ++i) {
    r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
    r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xdd);
  }
}

// The first n lanes (none for n <= 0).
HEADLAB_INLINE __mmask16 lanes(int64_t n) {
  if (n <= 0) return 0;
  return n >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << n) - 1);
}

}  // namespace headlab::fast
