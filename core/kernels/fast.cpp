// The bias-and-activation kernels of FastKernels (see kernels.h and fast.h) and its observed GEMM
// entry points. Each body is an always-inline template compiled twice: inside an AVX-512
// wrapper (x86-64-v4, 512-bit vectors preferred) and a portable one; GCC vectorizes the inner
// `omp simd` loops for the wrapper's ISA after inlining.

#include "core/kernels/fast.h"

#include <algorithm>

#include <omp.h>

#include "core/error.h"
#include "core/kernels/backends.h"
#include "core/tensor.h"
#include "core/threads.h"

namespace headlab::fast {
namespace {

template <bool kBias, bool kRelu>
HEADLAB_INLINE void bias_act_rows(float* __restrict c, int64_t rows, int64_t cols,
                                  const float* __restrict bias) {
  for (int64_t r = 0; r < rows; ++r) {
    float* __restrict cr = c + r * cols;
#pragma omp simd
    for (int64_t j = 0; j < cols; ++j) {
      float v = cr[j];
      if constexpr (kBias) v += bias[j];
      if constexpr (kRelu) v = v > 0.0f ? v : 0.0f;
      cr[j] = v;
    }
  }
}

HEADLAB_INLINE void bias_act_body(float* c, int64_t rows, int64_t cols, const float* bias,
                                  bool relu) {
  if (bias && relu)
    bias_act_rows<true, true>(c, rows, cols, bias);
  else if (bias)
    bias_act_rows<true, false>(c, rows, cols, bias);
  else if (relu)
    bias_act_rows<false, true>(c, rows, cols, bias);
}

// dz = dy * (y > 0) when kRelu; db = column sums of dz (or dy) when db is non-null. The block
// partials live in db's own storage plus a pooled [cols] scratch.
template <bool kRelu>
HEADLAB_INLINE void bias_act_backward_rows(const float* __restrict dy, const float* __restrict y,
                                           float* dz, float* __restrict db, float* __restrict part,
                                           int64_t rows, int64_t cols) {
  if (db) std::fill_n(db, cols, 0.0f);
  for (int64_t r0 = 0; r0 < rows; r0 += kRowBlock) {
    const int64_t r1 = std::min(rows, r0 + kRowBlock);
    if (db) std::fill_n(part, cols, 0.0f);
    for (int64_t r = r0; r < r1; ++r) {
      const float* __restrict g = dy + r * cols;
      if constexpr (kRelu) {
        const float* __restrict yr = y + r * cols;
        float* zr = dz + r * cols;  // may alias g
        if (db) {
#pragma omp simd
          for (int64_t j = 0; j < cols; ++j) {
            const float v = yr[j] > 0.0f ? g[j] : 0.0f;
            zr[j] = v;
            part[j] += v;
          }
        } else {
#pragma omp simd
          for (int64_t j = 0; j < cols; ++j) zr[j] = yr[j] > 0.0f ? g[j] : 0.0f;
        }
      } else {
#pragma omp simd
        for (int64_t j = 0; j < cols; ++j) part[j] += g[j];
      }
    }
    if (db) {
#pragma omp simd
      for (int64_t j = 0; j < cols; ++j) db[j] += part[j];
    }
  }
}

HEADLAB_INLINE void bias_act_backward_body(const float* dy, const float* y, float* dz, float* db,
                                           float* part, int64_t rows, int64_t cols) {
  if (y)
    bias_act_backward_rows<true>(dy, y, dz, db, part, rows, cols);
  else if (db)
    bias_act_backward_rows<false>(dy, y, dz, db, part, rows, cols);
}

// ---- the two builds of each body (row ranges and partials as in fast.h)

#define HEADLAB_DEFINE_BUILD(SUFFIX, ATTR)                                                        \
  ATTR void bias_act_##SUFFIX(float* c, int64_t rows, int64_t cols, const float* bias, bool relu, \
                              int nt) {                                                           \
    if (nt == 1) return bias_act_body(c, rows, cols, bias, relu);                                 \
    _Pragma("omp parallel num_threads(nt)") {                                                     \
      int64_t r0, r1;                                                                             \
      row_range(rows, omp_get_num_threads(), omp_get_thread_num(), r0, r1);                       \
      bias_act_body(c + r0 * cols, r1 - r0, cols, bias, relu);                                    \
    }                                                                                             \
  }                                                                                               \
  /* scratch: nt blocks of 2 * cols (partial db, then block partials) */                          \
  ATTR void bias_act_backward_##SUFFIX(const float* dy, const float* y, float* dz, float* db,     \
                                       float* scratch, int64_t rows, int64_t cols, int nt) {      \
    if (nt == 1) return bias_act_backward_body(dy, y, dz, db, scratch + cols, rows, cols);        \
    _Pragma("omp parallel num_threads(nt)") {                                                     \
      const int t = omp_get_thread_num();                                                         \
      int64_t r0, r1;                                                                             \
      row_range(rows, nt, t, r0, r1);                                                             \
      float* mine = scratch + 2 * cols * t;                                                       \
      bias_act_backward_body(dy + r0 * cols, y ? y + r0 * cols : nullptr,                         \
                             dz ? dz + r0 * cols : nullptr, db ? mine : nullptr, mine + cols,     \
                             r1 - r0, cols);                                                      \
    }                                                                                             \
    if (db) add_partials(db, scratch, nt, 2 * cols, cols);                                        \
  }

HEADLAB_DEFINE_BUILD(avx512, HEADLAB_AVX512_TARGET)
HEADLAB_DEFINE_BUILD(portable, )

bool detect_avx512() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
         __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512cd");
}

}  // namespace

bool avx512_enabled() {
  static const bool on = detect_avx512();
  return on;
}

int threads_for(int64_t work) {
  constexpr int64_t kMinWorkPerThread = 1 << 15;
  if (work < 2 * kMinWorkPerThread) return 1;
  return std::max(1, std::min(kernel_threads(), static_cast<int>(work / kMinWorkPerThread)));
}

void bias_act(float* c, int64_t rows, int64_t cols, const float* bias, bool relu) {
  if (rows == 0 || cols == 0 || (!bias && !relu)) return;
  const int nt = threads_for(rows * cols);
  if (avx512_enabled()) return bias_act_avx512(c, rows, cols, bias, relu, nt);
  bias_act_portable(c, rows, cols, bias, relu, nt);
}

}  // namespace headlab::fast

namespace headlab {

void FastKernels::gemm(const GemmDesc& d, const float* a, const float* b, float* c) const {
  detail::observe_gemm(d);
  matmul(d, a, b, c);
}

void FastKernels::gemm_bias_act(const GemmDesc& d, const float* a, const float* b,
                                const float* bias, bool relu, float* c) const {
  HEADLAB_ASSERT(d.batch == 1 && d.alpha == 1.0f && d.beta == 0.0f);
  detail::observe_gemm(d);
  matmul_bias_act(d, a, b, bias, relu, c);
}

void FastKernels::matmul_bias_act(const GemmDesc& d, const float* a, const float* b,
                                  const float* bias, bool relu, float* c) const {
  matmul(d, a, b, c);
  const int64_t ldc = d.ldc == 0 ? d.n : d.ldc;
  if (ldc == d.n) return fast::bias_act(c, d.m, d.n, bias, relu);
  detail::reference_bias_act(c, d.m, d.n, ldc, bias, relu);
}

void FastKernels::bias_act_backward(const float* dy, const float* y, float* dz, float* db,
                                    int64_t rows, int64_t cols) const {
  if (cols == 0) return;
  if (rows == 0) {
    if (db) std::fill_n(db, cols, 0.0f);
    return;
  }
  const int nt = fast::threads_for(rows * cols);
  Tensor scratch = Tensor::empty({2 * cols * nt});
  if (fast::avx512_enabled())
    return fast::bias_act_backward_avx512(dy, y, dz, db, scratch.data(), rows, cols, nt);
  fast::bias_act_backward_portable(dy, y, dz, db, scratch.data(), rows, cols, nt);
}

}  // namespace headlab
