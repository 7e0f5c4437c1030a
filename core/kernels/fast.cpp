// Vectorized fused kernels (see fast.h). Each body is an always-inline template compiled
// twice: inside an AVX-512 wrapper (x86-64-v4, 512-bit vectors preferred) and a portable one;
// GCC vectorizes the inner `omp simd` loops for the wrapper's ISA after inlining.
//
// Sums over rows (bias, gamma and beta gradients) run in blocks of kRowBlock rows: a block's
// partial sum is formed in registers and added to the total, so rounding grows with
// rows / kRowBlock + kRowBlock instead of rows. Sums along a row (LayerNorm statistics, at most
// a few thousand values) accumulate in fp32 vector lanes.

#include "core/kernels/fast.h"

#include <algorithm>
#include <cmath>

#include <omp.h>

#include "core/tensor.h"

namespace headlab::fast {
namespace {

constexpr int64_t kRowBlock = 32;

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
  if (bias && relu) bias_act_rows<true, true>(c, rows, cols, bias);
  else if (bias) bias_act_rows<true, false>(c, rows, cols, bias);
  else if (relu) bias_act_rows<false, true>(c, rows, cols, bias);
}

// dz = dy * (y > 0) when kRelu; db = column sums of dz (or dy) when db is non-null. The block
// partials live in db's own storage plus a pooled [cols] scratch.
template <bool kRelu>
HEADLAB_INLINE void bias_act_backward_rows(const float* __restrict dy, const float* __restrict y,
                                           float* dz, float* __restrict db,
                                           float* __restrict part, int64_t rows, int64_t cols) {
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
  if (y) bias_act_backward_rows<true>(dy, y, dz, db, part, rows, cols);
  else if (db) bias_act_backward_rows<false>(dy, y, dz, db, part, rows, cols);
}

HEADLAB_INLINE void add_layer_norm_forward_body(const float* __restrict x,
                                                const float* __restrict r,
                                                const float* __restrict gamma,
                                                const float* __restrict beta, float* __restrict y,
                                                float* __restrict xhat, float* __restrict rstd,
                                                int64_t rows, int64_t cols, float eps) {
  const float inv_n = 1.0f / static_cast<float>(cols);
  for (int64_t i = 0; i < rows; ++i) {
    const float* __restrict xi = x + i * cols;
    const float* __restrict ri = r + i * cols;
    float* __restrict hi = xhat + i * cols;
    float* __restrict yi = y + i * cols;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < cols; ++j) {
      const float s = xi[j] + ri[j];
      hi[j] = s;
      sum += s;
    }
    const float mean = sum * inv_n;
    float var = 0.0f;
#pragma omp simd reduction(+ : var)
    for (int64_t j = 0; j < cols; ++j) {
      const float d = hi[j] - mean;
      var += d * d;
    }
    const float rs = 1.0f / std::sqrt(var * inv_n + eps);
    rstd[i] = rs;
    if (gamma && beta) {
#pragma omp simd
      for (int64_t j = 0; j < cols; ++j) {
        const float h = (hi[j] - mean) * rs;
        hi[j] = h;
        yi[j] = h * gamma[j] + beta[j];
      }
    } else {
#pragma omp simd
      for (int64_t j = 0; j < cols; ++j) {
        const float h = (hi[j] - mean) * rs;
        hi[j] = h;
        yi[j] = (gamma ? h * gamma[j] : h) + (beta ? beta[j] : 0.0f);
      }
    }
  }
}

// part holds 2 * cols floats of scratch (block partials of dgamma and dbeta).
HEADLAB_INLINE void add_layer_norm_backward_body(
    const float* __restrict xhat, const float* __restrict rstd, const float* __restrict gamma,
    const float* __restrict dy, float* __restrict dx, bool accumulate_dx, float* __restrict dr,
    bool accumulate_dr, float* __restrict dgamma, float* __restrict dbeta, float* __restrict part,
    int64_t rows, int64_t cols) {
  const float inv_n = 1.0f / static_cast<float>(cols);
  const bool params = dgamma || dbeta;
  float* __restrict pg = part;
  float* __restrict pb = part + cols;
  if (dgamma) std::fill_n(dgamma, cols, 0.0f);
  if (dbeta) std::fill_n(dbeta, cols, 0.0f);
  for (int64_t r0 = 0; r0 < rows; r0 += kRowBlock) {
    const int64_t r1 = std::min(rows, r0 + kRowBlock);
    if (params) std::fill_n(part, 2 * cols, 0.0f);
    for (int64_t i = r0; i < r1; ++i) {
      const float* __restrict h = xhat + i * cols;
      const float* __restrict g = dy + i * cols;
      float su = 0.0f, suh = 0.0f;
      if (gamma) {
#pragma omp simd reduction(+ : su, suh)
        for (int64_t j = 0; j < cols; ++j) {
          const float u = g[j] * gamma[j];
          su += u;
          suh += u * h[j];
        }
      } else {
#pragma omp simd reduction(+ : su, suh)
        for (int64_t j = 0; j < cols; ++j) {
          su += g[j];
          suh += g[j] * h[j];
        }
      }
      const float rs = rstd[i], mu = su * inv_n, muh = suh * inv_n;
      float* __restrict dxi = dx + i * cols;
      float* __restrict dri = dr ? dr + i * cols : nullptr;
      // Four store variants, so each loop stays branch-free.
      auto ds_at = [&](int64_t j) {
        const float u = gamma ? g[j] * gamma[j] : g[j];
        return rs * (u - mu - h[j] * muh);
      };
      if (!dri) {
        if (accumulate_dx) {
#pragma omp simd
          for (int64_t j = 0; j < cols; ++j) dxi[j] += ds_at(j);
        } else {
#pragma omp simd
          for (int64_t j = 0; j < cols; ++j) dxi[j] = ds_at(j);
        }
      } else if (!accumulate_dx && !accumulate_dr) {
#pragma omp simd
        for (int64_t j = 0; j < cols; ++j) {
          const float ds = ds_at(j);
          dxi[j] = ds;
          dri[j] = ds;
        }
      } else {
        // A fresh target may hold garbage (NaN): it is selected away, never multiplied.
#pragma omp simd
        for (int64_t j = 0; j < cols; ++j) {
          const float ds = ds_at(j);
          dxi[j] = (accumulate_dx ? dxi[j] : 0.0f) + ds;
          dri[j] = (accumulate_dr ? dri[j] : 0.0f) + ds;
        }
      }
      if (params) {
#pragma omp simd
        for (int64_t j = 0; j < cols; ++j) {
          pg[j] += g[j] * h[j];
          pb[j] += g[j];
        }
      }
    }
    if (params) {
      if (dgamma) {
#pragma omp simd
        for (int64_t j = 0; j < cols; ++j) dgamma[j] += pg[j];
      }
      if (dbeta) {
#pragma omp simd
        for (int64_t j = 0; j < cols; ++j) dbeta[j] += pb[j];
      }
    }
  }
}

// ---- the two builds of each body. With nt > 1 threads the rows are split into nt ranges; sums
// over rows go to per-thread partials in `scratch` and are added in thread order afterwards (so
// a thread count gives the same result on every run).

HEADLAB_INLINE void row_range(int64_t rows, int nt, int t, int64_t& r0, int64_t& r1) {
  r0 = rows * t / nt;
  r1 = rows * (t + 1) / nt;
}

HEADLAB_INLINE void add_partials(float* out, const float* scratch, int nt, int64_t stride,
                                 int64_t cols) {
  std::fill_n(out, cols, 0.0f);
  for (int t = 0; t < nt; ++t) {
    const float* p = scratch + t * stride;
#pragma omp simd
    for (int64_t j = 0; j < cols; ++j) out[j] += p[j];
  }
}

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
  }                                                                                               \
  ATTR void add_layer_norm_forward_##SUFFIX(const float* x, const float* r, const float* gamma,   \
                                            const float* beta, float* y, float* xhat,             \
                                            float* rstd, int64_t rows, int64_t cols, float eps,   \
                                            int nt) {                                             \
    if (nt == 1)                                                                                  \
      return add_layer_norm_forward_body(x, r, gamma, beta, y, xhat, rstd, rows, cols, eps);      \
    _Pragma("omp parallel num_threads(nt)") {                                                     \
      int64_t r0, r1;                                                                             \
      row_range(rows, omp_get_num_threads(), omp_get_thread_num(), r0, r1);                       \
      const int64_t o = r0 * cols;                                                                \
      add_layer_norm_forward_body(x + o, r + o, gamma, beta, y + o, xhat + o, rstd + r0, r1 - r0, \
                                  cols, eps);                                                     \
    }                                                                                             \
  }                                                                                               \
  /* scratch: nt blocks of 4 * cols (partial dgamma, partial dbeta, block partials) */            \
  ATTR void add_layer_norm_backward_##SUFFIX(                                                     \
      const float* xhat, const float* rstd, const float* gamma, const float* dy, float* dx,       \
      bool accumulate_dx, float* dr, bool accumulate_dr, float* dgamma, float* dbeta,             \
      float* scratch, int64_t rows, int64_t cols, int nt) {                                       \
    if (nt == 1)                                                                                  \
      return add_layer_norm_backward_body(xhat, rstd, gamma, dy, dx, accumulate_dx, dr,           \
                                          accumulate_dr, dgamma, dbeta, scratch + 2 * cols, rows, \
                                          cols);                                                  \
    _Pragma("omp parallel num_threads(nt)") {                                                     \
      const int t = omp_get_thread_num();                                                         \
      int64_t r0, r1;                                                                             \
      row_range(rows, nt, t, r0, r1);                                                             \
      float* mine = scratch + 4 * cols * t;                                                       \
      const int64_t o = r0 * cols;                                                                \
      add_layer_norm_backward_body(xhat + o, rstd + r0, gamma, dy + o, dx + o, accumulate_dx,     \
                                   dr ? dr + o : nullptr, accumulate_dr,                          \
                                   dgamma ? mine : nullptr, dbeta ? mine + cols : nullptr,        \
                                   mine + 2 * cols, r1 - r0, cols);                               \
    }                                                                                             \
    if (dgamma) add_partials(dgamma, scratch, nt, 4 * cols, cols);                                \
    if (dbeta) add_partials(dbeta, scratch + cols, nt, 4 * cols, cols);                           \
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
  return std::max(1, std::min(omp_get_max_threads(), static_cast<int>(work / kMinWorkPerThread)));
}

void bias_act(float* c, int64_t rows, int64_t cols, const float* bias, bool relu) {
  if (rows == 0 || cols == 0 || (!bias && !relu)) return;
  const int nt = threads_for(rows * cols);
  if (avx512_enabled()) return bias_act_avx512(c, rows, cols, bias, relu, nt);
  bias_act_portable(c, rows, cols, bias, relu, nt);
}

void bias_act_backward(const float* dy, const float* y, float* dz, float* db, int64_t rows,
                       int64_t cols) {
  if (cols == 0) return;
  if (rows == 0) {
    if (db) std::fill_n(db, cols, 0.0f);
    return;
  }
  const int nt = threads_for(rows * cols);
  Tensor scratch = Tensor::empty({2 * cols * nt});
  if (avx512_enabled())
    return bias_act_backward_avx512(dy, y, dz, db, scratch.data(), rows, cols, nt);
  bias_act_backward_portable(dy, y, dz, db, scratch.data(), rows, cols, nt);
}

void add_layer_norm_forward(const float* x, const float* r, const float* gamma, const float* beta,
                            float* y, float* xhat, float* rstd, int64_t rows, int64_t cols,
                            float eps) {
  if (rows == 0 || cols == 0) return;
  const int nt = threads_for(rows * cols * 2);
  if (avx512_enabled())
    return add_layer_norm_forward_avx512(x, r, gamma, beta, y, xhat, rstd, rows, cols, eps, nt);
  add_layer_norm_forward_portable(x, r, gamma, beta, y, xhat, rstd, rows, cols, eps, nt);
}

void add_layer_norm_backward(const float* xhat, const float* rstd, const float* gamma,
                             const float* dy, float* dx, bool accumulate_dx, float* dr,
                             bool accumulate_dr, float* dgamma, float* dbeta, int64_t rows,
                             int64_t cols) {
  if (cols == 0) return;
  if (rows == 0) {
    if (dgamma) std::fill_n(dgamma, cols, 0.0f);
    if (dbeta) std::fill_n(dbeta, cols, 0.0f);
    return;
  }
  const int nt = threads_for(rows * cols * 2);
  Tensor scratch = Tensor::empty({4 * cols * nt});
  if (avx512_enabled())
    return add_layer_norm_backward_avx512(xhat, rstd, gamma, dy, dx, accumulate_dx, dr,
                                          accumulate_dr, dgamma, dbeta, scratch.data(), rows,
                                          cols, nt);
  add_layer_norm_backward_portable(xhat, rstd, gamma, dy, dx, accumulate_dx, dr, accumulate_dr,
                                   dgamma, dbeta, scratch.data(), rows, cols, nt);
}

}  // namespace headlab::fast
