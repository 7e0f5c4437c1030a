// The fused residual LayerNorm of FastKernels, forward and backward (formulas at
// Kernels::add_layer_norm_forward in kernels.h; blocks, row ranges and partials as in fast.h),
// and the plain LayerNorm of the onednn flavour on AVX-512 (fast::layer_norm_forward).
// Each body is an always-inline function compiled twice, in an AVX-512 and a portable wrapper.

#include <algorithm>
#include <cmath>

#include <omp.h>

#include "core/kernels/backends.h"
#include "core/kernels/fast.h"
#include "core/tensor.h"

namespace headlab::fast {
namespace {

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

// One row's mean(u) and mean(u * xhat), u = g * gamma (g without gamma).
HEADLAB_INLINE void ds_means(const float* __restrict h, const float* __restrict g,
                             const float* __restrict gamma, int64_t cols, float inv_n, float& mu,
                             float& muh) {
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
  mu = su * inv_n;
  muh = suh * inv_n;
}

// One row's ds = rs (u - mu - xhat muh) written (or added, per flag) to dxi and, when non-null,
// dri. Four store variants, so each loop stays branch-free.
HEADLAB_INLINE void store_ds(const float* __restrict h, const float* __restrict g,
                             const float* __restrict gamma, float rs, float mu, float muh,
                             float* __restrict dxi, bool accumulate_dx, float* __restrict dri,
                             bool accumulate_dr, int64_t cols) {
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
}

// One row's terms of the block partials of the parameter gradients: pg += g xhat, pb += g.
HEADLAB_INLINE void add_param_row(const float* __restrict g, const float* __restrict h,
                                  float* __restrict pg, float* __restrict pb, int64_t cols) {
#pragma omp simd
  for (int64_t j = 0; j < cols; ++j) {
    pg[j] += g[j] * h[j];
    pb[j] += g[j];
  }
}

// A row block's partials added into dgamma and dbeta (either may be null).
HEADLAB_INLINE void fold_param_block(const float* __restrict pg, const float* __restrict pb,
                                     float* __restrict dgamma, float* __restrict dbeta,
                                     int64_t cols) {
  if (dgamma) {
#pragma omp simd
    for (int64_t j = 0; j < cols; ++j) dgamma[j] += pg[j];
  }
  if (dbeta) {
#pragma omp simd
    for (int64_t j = 0; j < cols; ++j) dbeta[j] += pb[j];
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
      float mu, muh;
      ds_means(h, g, gamma, cols, inv_n, mu, muh);
      store_ds(h, g, gamma, rstd[i], mu, muh, dx + i * cols, accumulate_dx,
               dr ? dr + i * cols : nullptr, accumulate_dr, cols);
      if (params) add_param_row(g, h, pg, pb, cols);
    }
    fold_param_block(pg, pb, dgamma, dbeta, cols);
  }
}

// ---- plain LayerNorm (Kernels::layer_norm_forward / _backward): the same steps, with the mean
// and rstd saved instead of xhat, and xhat recomputed a row at a time in the backward.

HEADLAB_INLINE void layer_norm_forward_body(const float* __restrict x,
                                            const float* __restrict gamma,
                                            const float* __restrict beta, float* __restrict y,
                                            float* __restrict mean, float* __restrict rstd,
                                            int64_t rows, int64_t cols, float eps) {
  const float inv_n = 1.0f / static_cast<float>(cols);
  for (int64_t i = 0; i < rows; ++i) {
    const float* __restrict xi = x + i * cols;
    float* __restrict yi = y + i * cols;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < cols; ++j) sum += xi[j];
    const float m = sum * inv_n;
    float var = 0.0f;
#pragma omp simd reduction(+ : var)
    for (int64_t j = 0; j < cols; ++j) {
      const float d = xi[j] - m;
      var += d * d;
    }
    const float rs = 1.0f / std::sqrt(var * inv_n + eps);
    mean[i] = m;
    rstd[i] = rs;
#pragma omp simd
    for (int64_t j = 0; j < cols; ++j) {
      const float h = (xi[j] - m) * rs;
      yi[j] = (gamma ? h * gamma[j] : h) + (beta ? beta[j] : 0.0f);
    }
  }
}

// part holds 3 * cols floats of scratch (block partials of dgamma and dbeta, one row's xhat).
HEADLAB_INLINE void layer_norm_backward_body(const float* __restrict x,
                                             const float* __restrict gamma,
                                             const float* __restrict mean,
                                             const float* __restrict rstd,
                                             const float* __restrict dy, float* __restrict dx,
                                             float* __restrict dgamma, float* __restrict dbeta,
                                             float* __restrict part, int64_t rows, int64_t cols) {
  const float inv_n = 1.0f / static_cast<float>(cols);
  const bool params = dgamma || dbeta;
  float* __restrict pg = part;
  float* __restrict pb = part + cols;
  float* __restrict h = part + 2 * cols;
  if (dgamma) std::fill_n(dgamma, cols, 0.0f);
  if (dbeta) std::fill_n(dbeta, cols, 0.0f);
  for (int64_t r0 = 0; r0 < rows; r0 += kRowBlock) {
    const int64_t r1 = std::min(rows, r0 + kRowBlock);
    if (params) std::fill_n(part, 2 * cols, 0.0f);
    for (int64_t i = r0; i < r1; ++i) {
      const float* __restrict xi = x + i * cols;
      const float* __restrict g = dy + i * cols;
      const float m = mean[i], rs = rstd[i];
#pragma omp simd
      for (int64_t j = 0; j < cols; ++j) h[j] = (xi[j] - m) * rs;
      float mu, muh;
      ds_means(h, g, gamma, cols, inv_n, mu, muh);
      store_ds(h, g, gamma, rs, mu, muh, dx + i * cols, false, nullptr, false, cols);
      if (params) add_param_row(g, h, pg, pb, cols);
    }
    fold_param_block(pg, pb, dgamma, dbeta, cols);
  }
}

// The AVX-512 builds of the plain LayerNorm (the onednn flavour's on AVX-512; see fast.h).
// scratch: nt blocks of 5 * cols (partial dgamma, partial dbeta, block partials, xhat row).
HEADLAB_AVX512_TARGET void layer_norm_forward_avx512(const float* x, const float* gamma,
                                                     const float* beta, float* y, float* mean,
                                                     float* rstd, int64_t rows, int64_t cols,
                                                     float eps, int nt) {
  if (nt == 1) return layer_norm_forward_body(x, gamma, beta, y, mean, rstd, rows, cols, eps);
#pragma omp parallel num_threads(nt)
  {
    int64_t r0, r1;
    row_range(rows, omp_get_num_threads(), omp_get_thread_num(), r0, r1);
    layer_norm_forward_body(x + r0 * cols, gamma, beta, y + r0 * cols, mean + r0, rstd + r0,
                            r1 - r0, cols, eps);
  }
}

HEADLAB_AVX512_TARGET void layer_norm_backward_avx512(const float* x, const float* gamma,
                                                      const float* mean, const float* rstd,
                                                      const float* dy, float* dx, float* dgamma,
                                                      float* dbeta, float* scratch, int64_t rows,
                                                      int64_t cols, int nt) {
  if (nt == 1)
    return layer_norm_backward_body(x, gamma, mean, rstd, dy, dx, dgamma, dbeta, scratch + 2 * cols,
                                    rows, cols);
#pragma omp parallel num_threads(nt)
  {
    const int t = omp_get_thread_num();
    int64_t r0, r1;
    row_range(rows, nt, t, r0, r1);
    float* mine = scratch + 5 * cols * t;
    const int64_t o = r0 * cols;
    layer_norm_backward_body(x + o, gamma, mean + r0, rstd + r0, dy + o, dx + o,
                             dgamma ? mine : nullptr, dbeta ? mine + cols : nullptr,
                             mine + 2 * cols, r1 - r0, cols);
  }
  if (dgamma) add_partials(dgamma, scratch, nt, 5 * cols, cols);
  if (dbeta) add_partials(dbeta, scratch + cols, nt, 5 * cols, cols);
}

// ---- the two builds of each body

#define HEADLAB_DEFINE_BUILD(SUFFIX, ATTR)                                                         \
  ATTR void add_layer_norm_forward_##SUFFIX(const float* x, const float* r, const float* gamma,    \
                                            const float* beta, float* y, float* xhat, float* rstd, \
                                            int64_t rows, int64_t cols, float eps, int nt) {       \
    if (nt == 1)                                                                                   \
      return add_layer_norm_forward_body(x, r, gamma, beta, y, xhat, rstd, rows, cols, eps);       \
    _Pragma("omp parallel num_threads(nt)") {                                                      \
      int64_t r0, r1;                                                                              \
      row_range(rows, omp_get_num_threads(), omp_get_thread_num(), r0, r1);                        \
      const int64_t o = r0 * cols;                                                                 \
      add_layer_norm_forward_body(x + o, r + o, gamma, beta, y + o, xhat + o, rstd + r0, r1 - r0,  \
                                  cols, eps);                                                      \
    }                                                                                              \
  }                                                                                                \
  /* scratch: nt blocks of 4 * cols (partial dgamma, partial dbeta, block partials) */             \
  ATTR void add_layer_norm_backward_##SUFFIX(                                                      \
      const float* xhat, const float* rstd, const float* gamma, const float* dy, float* dx,        \
      bool accumulate_dx, float* dr, bool accumulate_dr, float* dgamma, float* dbeta,              \
      float* scratch, int64_t rows, int64_t cols, int nt) {                                        \
    if (nt == 1)                                                                                   \
      return add_layer_norm_backward_body(xhat, rstd, gamma, dy, dx, accumulate_dx, dr,            \
                                          accumulate_dr, dgamma, dbeta, scratch + 2 * cols, rows,  \
                                          cols);                                                   \
    _Pragma("omp parallel num_threads(nt)") {                                                      \
      const int t = omp_get_thread_num();                                                          \
      int64_t r0, r1;                                                                              \
      row_range(rows, nt, t, r0, r1);                                                              \
      float* mine = scratch + 4 * cols * t;                                                        \
      const int64_t o = r0 * cols;                                                                 \
      add_layer_norm_backward_body(xhat + o, rstd + r0, gamma, dy + o, dx + o, accumulate_dx,      \
                                   dr ? dr + o : nullptr, accumulate_dr, dgamma ? mine : nullptr,  \
                                   dbeta ? mine + cols : nullptr, mine + 2 * cols, r1 - r0, cols); \
    }                                                                                              \
    if (dgamma) add_partials(dgamma, scratch, nt, 4 * cols, cols);                                 \
    if (dbeta) add_partials(dbeta, scratch + cols, nt, 4 * cols, cols);                            \
  }

HEADLAB_DEFINE_BUILD(avx512, HEADLAB_AVX512_TARGET)
HEADLAB_DEFINE_BUILD(portable, )

}  // namespace

void layer_norm_forward(const float* x, const float* gamma, const float* beta, float* y,
                        float* mean, float* rstd, int64_t rows, int64_t cols, float eps) {
  if (rows == 0 || cols == 0) return;
  layer_norm_forward_avx512(x, gamma, beta, y, mean, rstd, rows, cols, eps,
                            threads_for(rows * cols * 2));
}

void layer_norm_backward(const float* x, const float* gamma, const float* mean, const float* rstd,
                         const float* dy, float* dx, float* dgamma, float* dbeta, int64_t rows,
                         int64_t cols) {
  if (cols == 0) return;
  if (rows == 0) {
    if (dgamma) std::fill_n(dgamma, cols, 0.0f);
    if (dbeta) std::fill_n(dbeta, cols, 0.0f);
    return;
  }
  const int nt = threads_for(rows * cols * 2);
  Tensor scratch = Tensor::empty({5 * cols * nt});
  layer_norm_backward_avx512(x, gamma, mean, rstd, dy, dx, dgamma, dbeta, scratch.data(), rows,
                             cols, nt);
}

}  // namespace headlab::fast

namespace headlab {

void FastKernels::add_layer_norm_forward(const float* x, const float* r, const float* gamma,
                                         const float* beta, float* y, float* xhat, float* rstd,
                                         int64_t rows, int64_t cols, float eps) const {
  if (rows == 0 || cols == 0) return;
  const int nt = fast::threads_for(rows * cols * 2);
  if (fast::avx512_enabled())
    return fast::add_layer_norm_forward_avx512(x, r, gamma, beta, y, xhat, rstd, rows, cols, eps,
                                               nt);
  fast::add_layer_norm_forward_portable(x, r, gamma, beta, y, xhat, rstd, rows, cols, eps, nt);
}

void FastKernels::add_layer_norm_backward(const float* xhat, const float* rstd, const float* gamma,
                                          const float* dy, float* dx, bool accumulate_dx, float* dr,
                                          bool accumulate_dr, float* dgamma, float* dbeta,
                                          int64_t rows, int64_t cols) const {
  if (cols == 0) return;
  if (rows == 0) {
    if (dgamma) std::fill_n(dgamma, cols, 0.0f);
    if (dbeta) std::fill_n(dbeta, cols, 0.0f);
    return;
  }
  const int nt = fast::threads_for(rows * cols * 2);
  Tensor scratch = Tensor::empty({4 * cols * nt});
  if (fast::avx512_enabled())
    return fast::add_layer_norm_backward_avx512(xhat, rstd, gamma, dy, dx, accumulate_dx, dr,
                                                accumulate_dr, dgamma, dbeta, scratch.data(), rows,
                                                cols, nt);
  fast::add_layer_norm_backward_portable(xhat, rstd, gamma, dy, dx, accumulate_dx, dr,
                                         accumulate_dr, dgamma, dbeta, scratch.data(), rows, cols,
                                         nt);
}

}  // namespace headlab
