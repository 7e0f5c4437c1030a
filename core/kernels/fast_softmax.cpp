// Softmax and log-softmax rows of the onednn flavour on AVX-512 (see fast.h): the score rows'
// vectorized exp (simd/attention_softmax.h), so cross-entropy's two row passes run without a
// oneDNN primitive; and the predicted class of each row of logits (argmax_rows). Softmax rows
// are shared among OpenMP threads when there is enough work; each row is computed by one thread
// the same way, so the thread count does not change the result.

#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "core/kernels/fast.h"
#include "core/kernels/simd/attention_softmax.h"

namespace headlab::fast {
namespace {

// y = (x - max) - log(sum exp(x - max)), subtracted in that order (the max is exact to take
// away; folded into one shift with the log it would round at the logits' magnitude); a row of
// -inf stays -inf.
HEADLAB_AVX512_TARGET HEADLAB_INLINE void log_softmax_row(const float* __restrict x,
                                                          float* __restrict y, int64_t cols) {
  float mx = kNegInf;
#pragma omp simd reduction(max : mx)
  for (int64_t j = 0; j < cols; ++j) mx = x[j] > mx ? x[j] : mx;
  if (mx == kNegInf) {
    std::fill_n(y, cols, kNegInf);
    return;
  }
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < cols; ++j) sum += exp_approx(x[j] - mx);
  const float log_sum = std::log(sum);
#pragma omp simd
  for (int64_t j = 0; j < cols; ++j) y[j] = (x[j] - mx) - log_sum;
}

HEADLAB_AVX512_TARGET void softmax_range(const float* x, float* y, int64_t r0, int64_t r1,
                                         int64_t cols) {
  for (int64_t r = r0; r < r1; ++r) {
    std::memcpy(y + r * cols, x + r * cols, sizeof(float) * cols);
    RowAvx512{}(y + r * cols, nullptr, nullptr, nullptr, nullptr, cols);
  }
}

HEADLAB_AVX512_TARGET void log_softmax_range(const float* x, float* y, int64_t r0, int64_t r1,
                                             int64_t cols) {
  for (int64_t r = r0; r < r1; ++r) log_softmax_row(x + r * cols, y + r * cols, cols);
}

template <class Range>
void rows_in_parallel(const float* x, float* y, int64_t rows, int64_t cols, Range range) {
  const int nt = threads_for(rows * cols);
  if (nt == 1) return range(x, y, 0, rows, cols);
#pragma omp parallel num_threads(nt)
  {
    int64_t r0, r1;
    row_range(rows, nt, omp_get_thread_num(), r0, r1);
    range(x, y, r0, r1, cols);
  }
}

}  // namespace

HEADLAB_AVX512_TARGET void argmax_rows(const float* x, int64_t rows, int64_t cols, int32_t* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = x + r * cols;
    int64_t best = 0;
    if (!std::isnan(row[0])) {  // std::max_element keeps a NaN that comes first
      // max_ps(v, m) returns m when v is NaN and keeps m on equal zeros: NaNs are skipped and
      // the maximum is a value of the row, as max_element finds it.
      const __m512 first = _mm512_set1_ps(row[0]);
      __m512 m = first;
      for (int64_t c = 0; c < cols; c += 16)
        m = _mm512_max_ps(_mm512_mask_loadu_ps(first, lanes(cols - c), row + c), m);
      const __m512 mx = _mm512_set1_ps(reduce16<true>(m));
      for (int64_t c = 0;; c += 16) {  // its first position (+0 and -0 compare equal)
        const __mmask16 in_row = lanes(cols - c);
        const __mmask16 at =
            _mm512_mask_cmp_ps_mask(in_row, _mm512_maskz_loadu_ps(in_row, row + c), mx, _CMP_EQ_OQ);
        if (at) {
          best = c + std::countr_zero(static_cast<unsigned>(at));
          break;
        }
      }
    }
    out[r] = static_cast<int32_t>(best);
  }
}

void softmax_rows(const float* x, float* y, int64_t rows, int64_t cols) {
  rows_in_parallel(x, y, rows, cols, softmax_range);
}

void log_softmax_rows(const float* x, float* y, int64_t rows, int64_t cols) {
  rows_in_parallel(x, y, rows, cols, log_softmax_range);
}

}  // namespace headlab::fast
