// headlab's own bf16 matrix product (see gemm.h): the products of Precision::bf16 on the CPU's
// AVX512_BF16 dot-product instruction, vdpbf16ps, which adds to each fp32 lane of an accumulator
// the products of one pair of bf16 values from each operand.
//
//   pack op(B) [k, n] -> panels [n / 32][k2][32] of pairs              threads share them
//   for each block of rows of op(A) that stays in L2 (each thread its own rows):
//     pack the block: a plain A as rows of k2 pairs, a transposed A as panels [k2][12]
//     for each B panel, for each 12 rows of the block: the 12 x 32 register block
// where k2 = ceil(k / 2) and a pair is one 32-bit word holding op(X)(i, 2q) in its low half and
// op(X)(i, 2q + 1) in its high half (zero past k). Both are rounded from fp32 to bf16 as they are
// packed, by the CPU's conversion (vcvtne2ps2bf16: round to nearest even, a NaN kept quiet, a
// subnormal input made zero, as the dot product would read it anyway), so each operand is read
// and rounded once, with no fp32 -> bf16 copy before packing. A register block broadcasts one pair
// of A per row and multiplies it with 16 pairs of B per vector: 32 multiply-adds an instruction.
// The layouts need no transpose but for a transposed B (the forward's weights), whose panels are
// made by 16 x 16 register transposes of pairs.
//
// The sum over k of each C element runs whole in one accumulator, in order, so as in fp32
// (gemm.cpp) the result does not depend on the thread count (threads take whole blocks of rows),
// beta = 1 adds exactly the beta = 0 result to C, and a call allocates nothing once the pool holds
// its pack buffers (oneDNN's bf16 matmul, which this replaced, allocated on every call).

#include <omp.h>

#include <algorithm>

#include "core/error.h"
#include "core/kernels/backends.h"
#include "core/kernels/simd/gemm.h"
#include "core/kernels/simd/gemm_common.h"
#include "core/tensor.h"

// AVX-512 and the bf16 dot product: only for CPUs where bf16_supported() holds.
#if defined(__clang__)
#define HEADLAB_BF16_TARGET __attribute__((target("arch=x86-64-v4,avx512bf16")))
#else
#define HEADLAB_BF16_TARGET \
  __attribute__((target("arch=x86-64-v4,avx512bf16,prefer-vector-width=512")))
#endif

namespace headlab::fast {
namespace {

constexpr int kMr = 12;                  // rows of a register block: 24 accumulators
constexpr int64_t kL2Words = 96 * 1024;  // an A block's budget: 384 KB of L2

// ---- rounding and pairs

// 32 bf16 values, as the dot product takes them, from the 16 pairs of x.
HEADLAB_BF16_TARGET HEADLAB_INLINE __m512bh as_bf16(__m512i x) {
  return (__m512bh)x;  // NOLINT(google-readability-casting): a vector bit cast
}

// Lane q: the pair (x[2q], x[2q + 1]) of 32 consecutive values x = v0 then v1.
HEADLAB_BF16_TARGET HEADLAB_INLINE __m512i pair_neighbours(__m512 v0, __m512 v1) {
  return _mm512_castps_si512(reinterpret_cast<__m512>(_mm512_cvtne2ps_pbh(v1, v0)));
}

// Lane i: the pair (lo[i], hi[i]): the 32 rounded values in order, interleaved.
HEADLAB_BF16_TARGET HEADLAB_INLINE __m512i pair_lanes(__m512 lo, __m512 hi) {
  alignas(64) static constexpr uint16_t kInterleave[32] = {
      0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
      8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  return _mm512_permutexvar_epi16(_mm512_load_si512(kInterleave), pair_neighbours(lo, hi));
}

// ---- packing: pairs of an operand X [count, k] (element (i, p)); the pair past an odd k is
// zero in its high half.

// The values of a stored row segment: src's, or with a mask (Bf16A::mask, the same layout) those
// where the mask is positive and zero elsewhere (a ReLU's backward).
HEADLAB_BF16_TARGET HEADLAB_INLINE __m512 masked_load(__mmask16 in, const float* src,
                                                      const float* mask) {
  if (mask)
    in &= _mm512_cmp_ps_mask(_mm512_maskz_loadu_ps(in, mask), _mm512_setzero_ps(), _CMP_GT_OQ);
  return _mm512_maskz_loadu_ps(in, src);
}

// Pairs q of X(i, p) = src[p * ld + i] (a transposed A, a plain B) for i in [0, count), written
// as panels [k2][width] from dst on (panel g at dst + g k2 width): a pair joins two stored rows.
// Lanes past count zero (up to the last panel's width). A pair's two rows are read once for all
// the panels, so each cache line of them is read once. With a mask (the same layout as src) the
// values are masked (masked_load); with sums, sums[i] = sum over p of X(i, p) in order, in fp32.
HEADLAB_BF16_TARGET void pack_pairs_across(const float* src, int64_t ld, int64_t count, int64_t k,
                                           int width, uint32_t* dst, const float* mask = nullptr,
                                           float* sums = nullptr) {
  const int64_t k2 = (k + 1) / 2, spans = (count + width - 1) / width;
  if (sums) std::fill_n(sums, count, 0.0f);
  constexpr int64_t kAhead = 8;  // pairs of rows requested ahead of their packing
  for (int64_t q = 0; q < k2; ++q) {
    const float* lo = src + 2 * q * ld;
    const bool has_hi = 2 * q + 1 < k;
    // The rows are ld apart, so the hardware's stream prefetchers may not see them coming.
    if (2 * (q + kAhead) + 1 < k)
      for (int64_t i = 0; i < count; i += 16) {
        __builtin_prefetch(src + 2 * (q + kAhead) * ld + i, 0, 3);
        __builtin_prefetch(src + (2 * (q + kAhead) + 1) * ld + i, 0, 3);
      }
    for (int64_t g = 0; g < spans; ++g)
      for (int i0 = 0; i0 < width; i0 += 16) {
        const int64_t i = g * width + i0;
        const __mmask16 in = lanes(count - i);
        const float* mlo = mask ? mask + 2 * q * ld + i : nullptr;
        const __m512 l = masked_load(in, lo + i, mlo);
        const __m512 h =
            has_hi ? masked_load(in, lo + ld + i, mask ? mlo + ld : nullptr) : _mm512_setzero_ps();
        _mm512_mask_storeu_epi32(dst + (g * k2 + q) * width + i0, lanes(width - i0),
                                 pair_lanes(l, h));
        if (sums) {  // this panel's lanes only (a 16-lane load reaches into the next panel)
          const __mmask16 own = in & lanes(width - i0);
          const __m512 sum = _mm512_add_ps(_mm512_maskz_loadu_ps(own, sums + i), l);
          _mm512_mask_storeu_ps(sums + i, own, _mm512_add_ps(sum, h));
        }
      }
  }
}

// Row i of X(i, p) = src[i * ld + p] as k2 pairs: dst[q] = (row[2q], row[2q + 1]), masked by
// mask's row (null: none) as masked_load.
HEADLAB_BF16_TARGET HEADLAB_INLINE void pair_row(const float* row, const float* mask, int64_t k,
                                                 uint32_t* dst) {
  for (int64_t p0 = 0; p0 < k; p0 += 32)
    _mm512_mask_storeu_epi32(
        dst + p0 / 2, lanes((k - p0 + 1) / 2),
        pair_neighbours(
            masked_load(lanes(k - p0), row + p0, mask ? mask + p0 : nullptr),
            masked_load(lanes(k - p0 - 16), row + p0 + 16, mask ? mask + p0 + 16 : nullptr)));
}

// dst [k2][width] for X(i, p) = src[i * ld + p] (a transposed B): a pair is two neighbours in a
// stored row; 16 rows' pairs at a time, turned into 16 pairs' rows by a register transpose.
HEADLAB_BF16_TARGET void pack_pairs_within(const float* src, int64_t ld, int64_t count, int64_t k,
                                           int width, uint32_t* dst) {
  const int64_t k2 = (k + 1) / 2;
  for (int i0 = 0; i0 < width; i0 += 16) {
    const int64_t n = std::clamp<int64_t>(count - i0, 0, 16);
    const __mmask16 out = lanes(width - i0);
    for (int64_t q0 = 0; q0 < k2; q0 += 16) {
      const int64_t p0 = 2 * q0;
      __m512 t[16];
      for (int i = 0; i < 16; ++i) {
        const float* row = src + (i0 + i) * ld + p0;
        t[i] = i < n ? _mm512_castsi512_ps(
                           pair_neighbours(_mm512_maskz_loadu_ps(lanes(k - p0), row),
                                           _mm512_maskz_loadu_ps(lanes(k - p0 - 16), row + 16)))
                     : _mm512_setzero_ps();
      }
      transpose16(t);
      for (int64_t q = 0; q < std::min<int64_t>(16, k2 - q0); ++q)
        _mm512_mask_storeu_ps(reinterpret_cast<float*>(dst + (q0 + q) * width + i0), out, t[q]);
    }
  }
}

// ---- the register block

// C block [rows <= 12][cols <= 32] (rows ldc apart) from B's panel bp [k2][32] and A's pair
// (r, q) at a[r * step + q] (kRows: A's rows as pairs) or a[q * step + r] (a panel).
// next_c: the block computed after this one, whose C lines are requested meanwhile.
template <bool kRows, bool kBeta, bool kBias, bool kRelu>
HEADLAB_BF16_TARGET void block(const uint32_t* a, int64_t step, const uint32_t* bp, int64_t k2,
                               float* c, int64_t ldc, int64_t rows, int64_t cols, const Epilogue& e,
                               const float* next_c) {
  for (int r = 0; r < kMr; ++r) {
    __builtin_prefetch(next_c + r * ldc, 1, 3);
    __builtin_prefetch(next_c + r * ldc + 16, 1, 3);
  }
  __m512 acc[kMr][2];
  for (int r = 0; r < kMr; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  for (int64_t q = 0; q < k2; ++q) {
    const __m512bh b0 = as_bf16(_mm512_loadu_si512(bp + q * kNr));
    const __m512bh b1 = as_bf16(_mm512_loadu_si512(bp + q * kNr + 16));
    for (int r = 0; r < kMr; ++r) {
      const uint32_t* x = kRows ? a + r * step + q : a + q * step + r;
      const __m512bh ab = as_bf16(_mm512_broadcastd_epi32(_mm_loadu_si32(x)));
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], ab, b0);
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], ab, b1);
    }
  }
  store_block<kMr, kBeta, kBias, kRelu>(acc, c, ldc, rows, cols, e);
}

using BlockFn = void (*)(const uint32_t*, int64_t, const uint32_t*, int64_t, float*, int64_t,
                         int64_t, int64_t, const Epilogue&, const float*);

template <bool kRows>
BlockFn block_for(const Epilogue& e) {
  if (e.beta != 0.0f) return &block<kRows, true, false, false>;  // bias, relu need beta 0
  if (e.bias) return e.relu ? &block<kRows, false, true, true> : &block<kRows, false, true, false>;
  return e.relu ? &block<kRows, false, false, true> : &block<kRows, false, false, false>;
}

// ---- one product

// A block of rows [i0, i0 + rows) of op(A), rounded into apack: a plain A as rows of k2 pairs
// (rows up to a whole register block, the extra ones zero), a transposed A as panels [k2][12].
HEADLAB_BF16_TARGET void pack_a_block(const GemmDesc& d, const float* a, const Bf16A& ao,
                                      int64_t i0, int64_t rows, uint32_t* apack) {
  const int64_t k2 = (d.k + 1) / 2;
  if (d.trans_a)
    return pack_pairs_across(a + i0, d.lda, rows, d.k, kMr, apack, ao.mask ? ao.mask + i0 : nullptr,
                             ao.row_sums ? ao.row_sums + i0 : nullptr);
  for (int64_t i = 0; i < rows; ++i)
    pair_row(a + (i0 + i) * d.lda, ao.mask ? ao.mask + (i0 + i) * d.lda : nullptr, d.k,
             apack + i * k2);
  std::fill(apack + rows * k2, apack + (rows + kMr - 1) / kMr * kMr * k2, 0u);
}

// Rows [r0, r1) of C for one batch item, B packed in bp; apack holds one block of A's rows.
HEADLAB_BF16_TARGET void rows_of_product(const GemmDesc& d, int64_t block_rows, BlockFn kernel,
                                         const float* a, const Bf16A& ao, const uint32_t* bp,
                                         float* c, int64_t r0, int64_t r1, uint32_t* apack,
                                         const Epilogue& e) {
  const int64_t k2 = (d.k + 1) / 2, panels = (d.n + kNr - 1) / kNr;
  for (int64_t i0 = r0; i0 < r1; i0 += block_rows) {
    const int64_t rows = std::min(block_rows, r1 - i0);
    pack_a_block(d, a, ao, i0, rows, apack);
    for (int64_t j = 0; j < panels; ++j) {
      Epilogue ej = e;
      if (e.bias) ej.bias = e.bias + j * kNr;
      const uint32_t* bj = bp + j * k2 * kNr;
      const int64_t nc = std::min<int64_t>(kNr, d.n - j * kNr);
      for (int64_t i = 0; i < rows; i += kMr) {
        // The next block: down this column of blocks, else the top of the next one.
        const float* next = i + kMr < rows ? c + (i0 + i + kMr) * d.ldc + j * kNr
                                           : c + i0 * d.ldc + std::min(j + 1, panels - 1) * kNr;
        const uint32_t* ai = d.trans_a ? apack + i / kMr * k2 * kMr : apack + i * k2;
        kernel(ai, d.trans_a ? kMr : k2, bj, k2, c + (i0 + i) * d.ldc + j * kNr, d.ldc,
               std::min<int64_t>(kMr, rows - i), nc, ej, next);
      }
    }
  }
}

HEADLAB_BF16_TARGET void gemm_bf16_avx512(const GemmDesc& d, const float* a, const Bf16A& ao,
                                          const float* b, float* c, const Epilogue& e) {
  const int64_t k2 = (d.k + 1) / 2, panels = (d.n + kNr - 1) / kNr;
  const int64_t block_rows = std::max<int64_t>(kMr, kL2Words / k2 / kMr * kMr);
  const BlockFn kernel = d.trans_a ? block_for<false>(e) : block_for<true>(e);
  const double flops = 2.0 * static_cast<double>(d.m * d.n) * static_cast<double>(d.k * d.batch);
  const int nt = gemm_threads(flops);
  const int64_t blocks = (d.m + kMr - 1) / kMr;
  // The packs hold 32-bit pairs in pooled fp32 storage (the same size), written and read only
  // through vector and 32-bit loads that may alias.
  const int64_t bwords = panels * k2 * kNr, awords = std::min(block_rows, blocks * kMr) * k2;
  Tensor bpack = Tensor::empty({bwords});
  Tensor apack = Tensor::empty({awords * nt});
  uint32_t* const bp = reinterpret_cast<uint32_t*>(bpack.data());
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    const int t = omp_get_thread_num();
    const int64_t r0 = std::min(d.m, blocks * t / nt * kMr);
    const int64_t r1 = std::min(d.m, blocks * (t + 1) / nt * kMr);
    uint32_t* const ap = reinterpret_cast<uint32_t*>(apack.data()) + t * awords;
    for (int64_t bi = 0; bi < d.batch; ++bi) {
      const float* bb = b + bi * d.stride_b;
#pragma omp for schedule(static)
      for (int64_t j = 0; j < panels; ++j) {
        const int64_t c0 = j * kNr;
        const int64_t nc = std::min<int64_t>(kNr, d.n - c0);
        if (d.trans_b)  // B stored [n, k]
          pack_pairs_within(bb + c0 * d.ldb, d.ldb, nc, d.k, kNr, bp + j * k2 * kNr);
        else
          pack_pairs_across(bb + c0, d.ldb, nc, d.k, kNr, bp + j * k2 * kNr);
      }
      // (the implicit barrier: B is packed)
      if (r0 < r1)
        rows_of_product(d, block_rows, kernel, a + bi * d.stride_a, ao, bp, c + bi * d.stride_c, r0,
                        r1, ap, e);
      // The next item repacks B: wait until every thread is done with it.
      if (bi + 1 < d.batch) {
#pragma omp barrier
      }
    }
  }
}

}  // namespace

void gemm_bf16(const GemmDesc& desc, const float* a, const float* b, float* c, const float* bias,
               bool relu, const Bf16A& ao) {
  HEADLAB_ASSERT(bf16_supported());
  const GemmDesc d = desc.resolved();
  HEADLAB_ASSERT(!ao.row_sums || (d.trans_a && d.batch == 1));
  HEADLAB_ASSERT(!ao.mask || d.batch == 1);
  if (d.m == 0 || d.n == 0 || d.batch == 0) return;
  HEADLAB_ASSERT(!(bias || relu) || (d.batch == 1 && d.alpha == 1.0f && d.beta == 0.0f));
  if (d.k == 0) {  // no product: C = beta C, or act(bias)
    if (ao.row_sums) std::fill_n(ao.row_sums, d.m, 0.0f);
    scale_only(d, c);
    if (bias || relu) detail::reference_bias_act(c, d.m, d.n, d.ldc, bias, relu);
    return;
  }
  gemm_bf16_avx512(d, a, ao, b, c, {.alpha = d.alpha, .beta = d.beta, .bias = bias, .relu = relu});
}

}  // namespace headlab::fast

namespace headlab {
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
