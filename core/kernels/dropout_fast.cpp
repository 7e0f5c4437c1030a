// Dropout masks of eight samples at once (fast.h, dropout_rows8): each sample's row has its own
// xoshiro256** generator (core/sample_rng.h), so the eight generators run side by side in the
// eight 64-bit lanes of four AVX-512 registers, step for step the scalar Rng::next_u64 (the
// multiplications by 5 and 9 as shifts and adds). Lane l's draws for eight consecutive elements
// form an 8 x 8 tile that is transposed in registers and stored as eight row pieces. The same
// draws and the same keep test as ew::dropout_mask, so the same bits, in 0.21 ns per element
// against 0.97 one row at a time, where each draw waits for the state the previous one wrote.

#include <cmath>

#include "core/elementwise.h"
#include "core/kernels/fast.h"
#include "core/kernels/simd/avx512.h"

namespace headlab::fast {
namespace {

HEADLAB_AVX512_TARGET HEADLAB_INLINE __m512i times(__m512i x, int shift) {  // x * (2^shift + 1)
  return _mm512_add_epi64(x, _mm512_slli_epi64(x, shift));
}

// rows[i] = row i of the 8 x 8 tile whose column j is cols[j] (lanes: rows).
HEADLAB_AVX512_TARGET HEADLAB_INLINE void transpose8(__m256 (&c)[8]) {
  __m256 t[8], u[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(c[i], c[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(c[i], c[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    u[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int i = 0; i < 4; ++i) {
    c[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
    c[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
  }
}

}  // namespace

HEADLAB_AVX512_TARGET void dropout_rows8(Rng (&rows)[8], float p, float* mask, int64_t ld,
                                         int64_t n) {
  const float keep_scale = 1.0f / (1.0f - p);
  const auto threshold = static_cast<uint64_t>(std::ceil(static_cast<double>(p) * 0x1.0p24));
  alignas(64) uint64_t words[4][8];
  for (int l = 0; l < 8; ++l) {
    const Rng::State s = rows[l].state();
    for (int w = 0; w < 4; ++w) words[w][l] = s[w];
  }
  __m512i s0 = _mm512_load_si512(words[0]), s1 = _mm512_load_si512(words[1]);
  __m512i s2 = _mm512_load_si512(words[2]), s3 = _mm512_load_si512(words[3]);
  const __m512i thr = _mm512_set1_epi64(static_cast<int64_t>(threshold));
  const __m256 keep = _mm256_set1_ps(keep_scale);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 tile[8];
    for (int j = 0; j < 8; ++j) {
      const __m512i result = times(_mm512_rol_epi64(times(s1, 2), 7), 3);  // rotl(s1 5, 7) 9
      const __m512i t = _mm512_slli_epi64(s1, 17);
      s2 = _mm512_xor_si512(s2, s0);
      s3 = _mm512_xor_si512(s3, s1);
      s1 = _mm512_xor_si512(s1, s2);
      s0 = _mm512_xor_si512(s0, s3);
      s2 = _mm512_xor_si512(s2, t);
      s3 = _mm512_rol_epi64(s3, 45);
      const __mmask8 kept = _mm512_cmpge_epu64_mask(_mm512_srli_epi64(result, 40), thr);
      tile[j] = _mm256_maskz_mov_ps(kept, keep);
    }
    transpose8(tile);
    for (int l = 0; l < 8; ++l) _mm256_storeu_ps(mask + l * ld + i, tile[l]);
  }
  _mm512_store_si512(words[0], s0);
  _mm512_store_si512(words[1], s1);
  _mm512_store_si512(words[2], s2);
  _mm512_store_si512(words[3], s3);
  for (int l = 0; l < 8; ++l) {  // the last n % 8 elements of each row, one row at a time
    rows[l].set_state({words[0][l], words[1][l], words[2][l], words[3][l]});
    ew::dropout_mask(rows[l], p, mask + l * ld + i, n - i);
  }
}

}  // namespace headlab::fast
