#pragma once
// Vectorized loops of FastKernels (internal to core; use kernels()). Each kernel body has an
// AVX-512 build and a portable build of the same source; the AVX-512 one runs where the CPU has
// it (checked once). Row-major fp32, no allocation beyond pooled scratch, sizes of zero do
// nothing. The kernels themselves are FastKernels' methods (backends.h; fast.cpp,
// fast_layer_norm.cpp and attention_fast.cpp); what they share is here.
//
// Sums over rows (bias, gamma and beta gradients) run in blocks of kRowBlock rows: a block's
// partial sum is formed in registers and added to the total, so rounding grows with
// rows / kRowBlock + kRowBlock instead of rows. Sums along a row (LayerNorm statistics, at most
// a few thousand values) accumulate in fp32 vector lanes.
//
// With nt > 1 threads a kernel's rows are split into nt ranges (row_range); its sums over rows go
// to per-thread partials and are added in thread order afterwards (add_partials), so a thread
// count gives the same result on every run.

#include <algorithm>
#include <cstdint>

#include "core/rng.h"

// The build attribute and inlining for the two builds of each kernel body.
// The fuzz build's clang: its target attribute has no prefer-vector-width, and it takes no [[...]]
// attribute after __attribute__.
#if defined(__clang__)
#define HEADLAB_AVX512_TARGET __attribute__((target("arch=x86-64-v4")))
#define HEADLAB_INLINE __attribute__((always_inline)) inline
#else
#define HEADLAB_AVX512_TARGET __attribute__((target("arch=x86-64-v4,prefer-vector-width=512")))
#define HEADLAB_INLINE [[gnu::always_inline]] inline
#endif

namespace headlab::fast {

// c [rows, cols] += bias (per column; null: none), then max(0, .) when relu.
void bias_act(float* c, int64_t rows, int64_t cols, const float* bias, bool relu);

// True when the AVX-512 builds run.
bool avx512_enabled();

// Softmax and log-softmax over each row of [rows, cols] (Kernels::softmax_forward and
// log_softmax_forward's contracts, -inf entries and all -inf rows included), AVX-512 only: the
// onednn flavour's where avx512_enabled() (no oneDNN primitive, so no allocation per call).
void softmax_rows(const float* x, float* y, int64_t rows, int64_t cols);
void log_softmax_rows(const float* x, float* y, int64_t rows, int64_t cols);
// ew::argmax_rows (the first position of each row's largest value, NaN as std::max_element
// takes it), AVX-512 only.
void argmax_rows(const float* x, int64_t rows, int64_t cols, int32_t* out);
// LayerNorm forward and backward (Kernels::layer_norm_forward / _backward's contracts), AVX-512
// only, likewise (fast_layer_norm.cpp).
void layer_norm_forward(const float* x, const float* gamma, const float* beta, float* y,
                        float* mean, float* rstd, int64_t rows, int64_t cols, float eps);
void layer_norm_backward(const float* x, const float* gamma, const float* mean, const float* rstd,
                         const float* dy, float* dx, float* dgamma, float* dbeta, int64_t rows,
                         int64_t cols);

// Dropout masks of eight rows at once (dropout_fast.cpp), AVX-512 only: row l (ld floats apart)
// gets the n elements that ew::dropout_mask(rows[l], p, row, n) would draw, the same bits, and
// rows[l] ends where that leaves it.
void dropout_rows8(Rng (&rows)[8], float p, float* mask, int64_t ld, int64_t n);

// Threads for a kernel over `work` floats: OpenMP's count when there is enough work to share,
// else 1 (a parallel region costs microseconds).
int threads_for(int64_t work);

inline constexpr int64_t kRowBlock = 32;

// Rows [r0, r1) of thread t among nt.
HEADLAB_INLINE void row_range(int64_t rows, int nt, int t, int64_t& r0, int64_t& r1) {
  r0 = rows * t / nt;
  r1 = rows * (t + 1) / nt;
}

// out [cols] = the sum of nt partials [cols], `stride` apart in scratch, in thread order.
HEADLAB_INLINE void add_partials(float* out, const float* scratch, int nt, int64_t stride,
                                 int64_t cols) {
  std::fill_n(out, cols, 0.0f);
  for (int t = 0; t < nt; ++t) {
    const float* p = scratch + t * stride;
#pragma omp simd
    for (int64_t j = 0; j < cols; ++j) out[j] += p[j];
  }
}

}  // namespace headlab::fast
