// headlab's own AVX-512 matrix product (see gemm.h).
//
//   for each block of k (one, or blocks of at most 512 for a transposed A too large to stream
//   once per B panel; their sizes a function of the shape alone):
//     pack op(B) [k block, n] -> panels [n / 32][k block][32]     threads share them
//     for each block of rows of op(A) that stays in L2 (each thread its own rows):
//       for each B panel, for each R rows of the block: the R x 32 register block
// The register block sums its k block in registers; a partial sum of an earlier k block is added
// to it from a scratch T (the shape of C) and the sum goes back to T, except after the last
// block, where alpha (sum), + beta C, bias and ReLU go to C. So C is read only through beta, and
// beta = 1 adds exactly the beta = 0 result.
//
// op(A) is read where it lies: a transposed A (stored [k, m], the weight gradient dz^T x) gives
// R contiguous values per k, a plain A R rows each read in order; only A's last partial R rows
// are packed into a [k][R] panel, zero past the edge. Blocks are R = 12 rows tall for a
// transposed A (more reuse of each B vector) that fills them, and 8 otherwise (the smaller block
// keeps its k loop at the FMA pipes' full rate).

#include "core/kernels/simd/gemm.h"

#include <omp.h>

#include <algorithm>

#include "core/error.h"
#include "core/kernels/backends.h"
#include "core/kernels/simd/avx512.h"
#include "core/kernels/simd/gemm_common.h"
#include "core/tensor.h"
#include "core/threads.h"

namespace headlab::fast {
namespace {

constexpr int64_t kL2Floats = 96 * 1024;  // an A block's budget: 384 KB of L2
constexpr int64_t kMaxKBlock = 512;
constexpr double kMaxStream = 8.0 * 1024 * 1024;  // floats: 32 MB

// ---- packing

// dst [k][width] = src^T for src [nrows, k] (rows ld apart): dst[p * width + i] = src[i * ld + p];
// lanes past nrows zero. Through 16 x 16 register transposes.
HEADLAB_AVX512_TARGET void pack_transposed(const float* src, int64_t ld, int64_t nrows, int64_t k,
                                           int width, float* dst) {
  for (int64_t r0 = 0; r0 < width; r0 += 16) {
    const int64_t n = std::clamp<int64_t>(nrows - r0, 0, 16);
    const __mmask16 out = lanes(width - r0);
    for (int64_t p0 = 0; p0 < k; p0 += 16) {
      const int64_t w = std::min<int64_t>(16, k - p0);
      __m512 t[16];
      for (int i = 0; i < 16; ++i)
        t[i] =
            i < n ? _mm512_maskz_loadu_ps(lanes(w), src + (r0 + i) * ld + p0) : _mm512_setzero_ps();
      transpose16(t);
      for (int64_t p = 0; p < w; ++p) _mm512_mask_storeu_ps(dst + (p0 + p) * width + r0, out, t[p]);
    }
  }
}

// dst [k][width] = the first ncols columns of src [k, .] (rows ld apart); lanes past ncols zero.
HEADLAB_AVX512_TARGET void pack_straight(const float* src, int64_t ld, int64_t ncols, int64_t k,
                                         int width, float* dst) {
  for (int64_t p = 0; p < k; ++p)
    for (int c0 = 0; c0 < width; c0 += 16)
      _mm512_mask_storeu_ps(dst + p * width + c0, lanes(width - c0),
                            _mm512_maskz_loadu_ps(lanes(ncols - c0), src + p * ld + c0));
}

// Panel j of op(B) [k, n]: columns [32 j, 32 j + 32).
HEADLAB_AVX512_TARGET void pack_b_panel(const GemmDesc& d, const float* b, int64_t j, float* dst) {
  const int64_t c0 = j * kNr, nc = std::min<int64_t>(kNr, d.n - c0);
  if (d.trans_b)  // B stored [n, k]
    pack_transposed(b + c0 * d.ldb, d.ldb, nc, d.k, kNr, dst);
  else
    pack_straight(b + c0, d.ldb, nc, d.k, kNr, dst);
}

// Rows [r0, r0 + rows) of op(A) [m, k] as panels of `mr` rows.
HEADLAB_AVX512_TARGET void pack_a_rows(const GemmDesc& d, const float* a, int64_t r0, int64_t rows,
                                       int mr, float* dst) {
  for (int64_t i = 0; i < rows; i += mr) {
    const int64_t nr = std::min<int64_t>(mr, rows - i);
    float* panel = dst + (i / mr) * d.k * mr;
    if (d.trans_a)  // A stored [k, m]
      pack_straight(a + r0 + i, d.lda, nr, d.k, mr, panel);
    else
      pack_transposed(a + (r0 + i) * d.lda, d.lda, nr, d.k, mr, panel);
  }
}

// ---- the register block

// C block [rows <= R][cols <= 32] (rows ldc apart) from bp [k][32] and A's element (r, p) at
// a[r * step + p] (kRows: A's rows in place) or a[p * step + r] (a panel, or a transposed A in
// place). next_c: the block computed after this one, whose C lines are requested meanwhile (C is
// written once per product, so they come from memory; waiting for them stalls a block).
// With t (rows ldc apart like C): add t_in's partial sums (unless first) and, unless last, store
// the sum to t instead of finishing C.
struct Partial {
  float* t = nullptr;
  bool first = true, last = true;
};

template <int R, bool kRows, bool kBeta, bool kBias, bool kRelu>
HEADLAB_AVX512_TARGET void block(const float* a, int64_t step, const float* bp, int64_t k, float* c,
                                 int64_t ldc, int64_t rows, int64_t cols, const Epilogue& e,
                                 const float* next_c, const Partial& part) {
  for (int r = 0; r < R; ++r) {
    __builtin_prefetch(next_c + r * ldc, 1, 3);
    __builtin_prefetch(next_c + r * ldc + 16, 1, 3);
  }
  __m512 acc[R][2];
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  for (int64_t p = 0; p < k; ++p) {
    const __m512 b0 = _mm512_loadu_ps(bp + p * kNr), b1 = _mm512_loadu_ps(bp + p * kNr + 16);
    for (int r = 0; r < R; ++r) {
      const __m512 x = _mm512_set1_ps(kRows ? a[r * step + p] : a[p * step + r]);
      acc[r][0] = _mm512_fmadd_ps(x, b0, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(x, b1, acc[r][1]);
    }
  }
  const __mmask16 m[2] = {lanes(cols), lanes(cols - 16)};
  if (part.t) {
    for (int r = 0; r < R; ++r)
      if (r < rows && !part.first)
        for (int v = 0; v < 2; ++v)
          acc[r][v] =
              _mm512_add_ps(acc[r][v], _mm512_maskz_loadu_ps(m[v], part.t + r * ldc + 16 * v));
    if (!part.last) {
      for (int r = 0; r < R; ++r)
        if (r < rows)
          for (int v = 0; v < 2; ++v)
            _mm512_mask_storeu_ps(part.t + r * ldc + 16 * v, m[v], acc[r][v]);
      return;
    }
  }
  store_block<R, kBeta, kBias, kRelu>(acc, c, ldc, rows, cols, e);
}

using BlockFn = void (*)(const float*, int64_t, const float*, int64_t, float*, int64_t, int64_t,
                         int64_t, const Epilogue&, const float*, const Partial&);

template <int R, bool kRows>
BlockFn block_for(const Epilogue& e) {
  if (e.beta != 0.0f) return &block<R, kRows, true, false, false>;  // bias, relu need beta 0
  if (e.bias)
    return e.relu ? &block<R, kRows, false, true, true> : &block<R, kRows, false, true, false>;
  return e.relu ? &block<R, kRows, false, false, true> : &block<R, kRows, false, false, false>;
}

// ---- one product

// Block sizes and kernels of a product.
struct Plan {
  int mr = 8;            // rows of a register block
  int64_t k_blocks = 1;  // blocks of k, sizes k_block or one less
  int64_t k_block = 0;
  int64_t block_rows = 0;  // rows of A per L2 block
  int64_t panels = 0;      // of B
  BlockFn direct = nullptr, packed = nullptr;

  Plan(const GemmDesc& d, const Epilogue& e) {
    // 12 rows for a transposed A unless its rows would leave much of the last block empty.
    const int64_t rows12 = (d.m + 11) / 12 * 12;
    mr = d.trans_a && static_cast<double>(d.m) >= 0.96 * static_cast<double>(rows12) ? 12 : 8;
    panels = (d.n + kNr - 1) / kNr;
    // A transposed A streams whole, once per B panel: past kMaxStream floats in all, k is cut
    // in blocks so each block's strips of A stay in cache across the panels.
    const double stream = static_cast<double>(panels) * static_cast<double>(d.k * d.m);
    k_blocks = d.trans_a && stream > kMaxStream ? (d.k + kMaxKBlock - 1) / kMaxKBlock : 1;
    k_block = (d.k + k_blocks - 1) / k_blocks;
    block_rows = std::max<int64_t>(mr, kL2Floats / k_block / mr * mr);
    if (mr == 12) {
      direct = packed = block_for<12, false>(e);
    } else {
      direct = d.trans_a ? block_for<8, false>(e) : block_for<8, true>(e);
      packed = block_for<8, false>(e);
    }
  }
  // The product of k block kb (of k_block values, the last one fewer), and its operands.
  GemmDesc sub(const GemmDesc& d, int64_t kb) const {
    GemmDesc s = d;
    s.k = std::min(k_block, d.k - kb * k_block);
    return s;
  }
  const float* a_at(const GemmDesc& d, const float* a, int64_t kb) const {
    return a + (d.trans_a ? kb * k_block * d.lda : kb * k_block);
  }
  const float* b_at(const GemmDesc& d, const float* b, int64_t kb) const {
    return b + (d.trans_b ? kb * k_block : kb * k_block * d.ldb);
  }
};

// Rows [r0, r1) of C for one batch item and k block (d.k its size; a and bp at its start).
HEADLAB_AVX512_TARGET void rows_of_product(const GemmDesc& d, const Plan& plan, const float* a,
                                           const float* bp, float* c, int64_t r0, int64_t r1,
                                           float* apack, const Epilogue& e, Partial part) {
  const int mr = plan.mr;
  float* t = part.t;
  for (int64_t i0 = r0; i0 < r1; i0 += plan.block_rows) {
    const int64_t rows = std::min(plan.block_rows, r1 - i0);
    const int64_t direct = rows / mr * mr;  // rows read in place
    if (direct < rows) pack_a_rows(d, a, i0 + direct, rows - direct, mr, apack);
    for (int64_t j = 0; j < plan.panels; ++j) {
      Epilogue ej = e;
      if (e.bias) ej.bias = e.bias + j * kNr;
      const float* bj = bp + j * d.k * kNr;
      const int64_t nc = std::min<int64_t>(kNr, d.n - j * kNr);
      for (int64_t i = i0; i < i0 + rows; i += mr) {
        // The next block: down this column of blocks, else the top of the next one.
        const float* next = i + mr < i0 + rows
                                ? c + (i + mr) * d.ldc + j * kNr
                                : c + i0 * d.ldc + std::min(j + 1, plan.panels - 1) * kNr;
        const int64_t nr = std::min<int64_t>(mr, i0 + rows - i);
        float* ci = c + i * d.ldc + j * kNr;
        if (t) part.t = t + i * d.ldc + j * kNr;
        if (i < i0 + direct)
          plan.direct(d.trans_a ? a + i : a + i * d.lda, d.lda, bj, d.k, ci, d.ldc, nr, nc, ej,
                      next, part);
        else
          plan.packed(apack + (i - i0 - direct) / mr * d.k * mr, mr, bj, d.k, ci, d.ldc, nr, nc, ej,
                      next, part);
      }
    }
  }
}

HEADLAB_AVX512_TARGET void gemm_avx512(const GemmDesc& d, const float* a, const float* b, float* c,
                                       const Epilogue& e) {
  const Plan plan(d, e);
  const int64_t bfloats = plan.panels * plan.k_block * kNr;
  const double flops = 2.0 * static_cast<double>(d.m * d.n) * static_cast<double>(d.k * d.batch);
  const int nt = gemm_threads(flops);
  // Batch items to threads when there are enough of them, else rows of each item (whole register
  // blocks, so the result does not depend on the thread count).
  const bool by_item = d.batch >= nt;
  const int64_t blocks = (d.m + plan.mr - 1) / plan.mr;
  const int64_t astride = plan.mr * plan.k_block;  // a thread's partial rows
  const int64_t tfloats = plan.k_blocks > 1 ? (d.m - 1) * d.ldc + d.n : 0;  // T, like C
  const int copies = by_item ? nt : 1;
  Tensor bpack = Tensor::empty({std::max<int64_t>(1, bfloats * copies)});
  Tensor apack = Tensor::empty({std::max<int64_t>(1, astride * nt)});
  Tensor tbuf = Tensor::empty({std::max<int64_t>(1, tfloats * copies)});
  // One k block of batch item bi: its B panels packed by `pack` (a loop over [j0, j1) panels),
  // then rows [r0, r1) by thread t.
  auto run = [&](int64_t bi, int64_t kb, int t, int copy, int64_t r0, int64_t r1) {
    const GemmDesc s = plan.sub(d, kb);
    const Partial part{.t = tfloats ? tbuf.data() + copy * tfloats : nullptr,
                       .first = kb == 0,
                       .last = kb + 1 == plan.k_blocks};
    rows_of_product(s, plan, plan.a_at(d, a + bi * d.stride_a, kb), bpack.data() + copy * bfloats,
                    c + bi * d.stride_c, r0, r1, apack.data() + t * astride, e, part);
  };
  auto pack = [&](int64_t bi, int64_t kb, int copy, int64_t j) {
    const GemmDesc s = plan.sub(d, kb);
    pack_b_panel(s, plan.b_at(d, b + bi * d.stride_b, kb), j,
                 bpack.data() + copy * bfloats + j * s.k * kNr);
  };
  if (by_item) {
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
    for (int64_t bi = 0; bi < d.batch; ++bi) {
      const int t = omp_get_thread_num();
      for (int64_t kb = 0; kb < plan.k_blocks; ++kb) {
        for (int64_t j = 0; j < plan.panels; ++j) pack(bi, kb, t, j);
        run(bi, kb, t, t, 0, d.m);
      }
    }
    return;
  }
#pragma omp parallel num_threads(nt)
  {
    const int t = omp_get_thread_num();
    const int64_t r0 = std::min(d.m, blocks * t / nt * plan.mr);
    const int64_t r1 = std::min(d.m, blocks * (t + 1) / nt * plan.mr);
    for (int64_t bi = 0; bi < d.batch; ++bi)
      for (int64_t kb = 0; kb < plan.k_blocks; ++kb) {
#pragma omp for schedule(static)
        for (int64_t j = 0; j < plan.panels; ++j) pack(bi, kb, 0, j);
        // (the implicit barrier: B is packed)
        if (r0 < r1) run(bi, kb, t, 0, r0, r1);
        // The next k block or item repacks B: wait until every thread is done with it.
        if (kb + 1 < plan.k_blocks || bi + 1 < d.batch) {
#pragma omp barrier
        }
      }
  }
}

bool detect() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
         __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq");
}

}  // namespace

bool own_gemm_available() {
  static const bool on = detect();
  return on;
}

void gemm(const GemmDesc& desc, const float* a, const float* b, float* c, const float* bias,
          bool relu) {
  HEADLAB_ASSERT(own_gemm_available());
  const GemmDesc d = desc.resolved();
  if (d.m == 0 || d.n == 0 || d.batch == 0) return;
  HEADLAB_ASSERT(!(bias || relu) || (d.batch == 1 && d.alpha == 1.0f && d.beta == 0.0f));
  if (d.k == 0) {  // no product: C = beta C, or act(bias)
    scale_only(d, c);
    if (bias || relu) detail::reference_bias_act(c, d.m, d.n, d.ldc, bias, relu);
    return;
  }
  gemm_avx512(d, a, b, c, {.alpha = d.alpha, .beta = d.beta, .bias = bias, .relu = relu});
}

}  // namespace headlab::fast
