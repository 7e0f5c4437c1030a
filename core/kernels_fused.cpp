// The fused kernels of the Kernels base class (see core/kernels.h): plain loops with double
// accumulation for the reference backend, the vectorized loops of fast_kernels.h for blas and
// onednn, and for onednn a matmul with its bias and ReLU fused (kernels_fused_onednn.cpp).

#include <cmath>
#include <limits>

#include "core/error.h"
#include "core/fast_kernels.h"
#include "core/kernels.h"

namespace headlab {

// Defined in kernels_fused_onednn.cpp.
void onednn_gemm_bias_act(const GemmDesc& d, const float* a, const float* b, const float* bias,
                          bool relu, float* c);

void Kernels::gemm_bias_act(const GemmDesc& d, const float* a, const float* b, const float* bias,
                            bool relu, float* c) const {
  HEADLAB_ASSERT(d.batch == 1 && d.alpha == 1.0f && d.beta == 0.0f);
  if (backend() == Backend::onednn) return onednn_gemm_bias_act(d, a, b, bias, relu, c);
  gemm(d, a, b, c);
  const int64_t ldc = d.ldc == 0 ? d.n : d.ldc;
  if (backend() != Backend::reference && ldc == d.n) return fast::bias_act(c, d.m, d.n, bias, relu);
  for (int64_t i = 0; i < d.m; ++i)
    for (int64_t j = 0; j < d.n; ++j) {
      float& v = c[i * ldc + j];
      if (bias) v += bias[j];
      if (relu) v = v > 0.0f ? v : 0.0f;
    }
}

void Kernels::bias_act_backward(const float* dy, const float* y, float* dz, float* db,
                                int64_t rows, int64_t cols) const {
  if (backend() != Backend::reference) return fast::bias_act_backward(dy, y, dz, db, rows, cols);
  if (y)
    for (int64_t i = 0; i < rows * cols; ++i) dz[i] = y[i] > 0.0f ? dy[i] : 0.0f;
  if (!db) return;
  const float* src = y ? dz : dy;
  for (int64_t j = 0; j < cols; ++j) {
    double acc = 0.0;
    for (int64_t r = 0; r < rows; ++r) acc += src[r * cols + j];
    db[j] = static_cast<float>(acc);
  }
}

void Kernels::add_layer_norm_forward(const float* x, const float* r, const float* gamma,
                                     const float* beta, float* y, float* xhat, float* rstd,
                                     int64_t rows, int64_t cols, float eps) const {
  if (backend() != Backend::reference)
    return fast::add_layer_norm_forward(x, r, gamma, beta, y, xhat, rstd, rows, cols, eps);
  for (int64_t i = 0; i < rows; ++i) {
    const float* xi = x + i * cols;
    const float* ri = r + i * cols;
    double m = 0.0;
    for (int64_t j = 0; j < cols; ++j) m += static_cast<double>(xi[j] + ri[j]);
    m /= static_cast<double>(cols);
    double var = 0.0;
    for (int64_t j = 0; j < cols; ++j) {
      const double d = static_cast<double>(xi[j] + ri[j]) - m;
      var += d * d;
    }
    var /= static_cast<double>(cols);
    const double rs = 1.0 / std::sqrt(var + eps);
    rstd[i] = static_cast<float>(rs);
    for (int64_t j = 0; j < cols; ++j) {
      const double h = (static_cast<double>(xi[j] + ri[j]) - m) * rs;
      xhat[i * cols + j] = static_cast<float>(h);
      double v = h;
      if (gamma) v *= gamma[j];
      if (beta) v += beta[j];
      y[i * cols + j] = static_cast<float>(v);
    }
  }
}

void Kernels::add_layer_norm_backward(const float* xhat, const float* rstd, const float* gamma,
                                      const float* dy, float* dx, bool accumulate_dx, float* dr,
                                      bool accumulate_dr, float* dgamma, float* dbeta,
                                      int64_t rows, int64_t cols) const {
  if (backend() != Backend::reference)
    return fast::add_layer_norm_backward(xhat, rstd, gamma, dy, dx, accumulate_dx, dr,
                                         accumulate_dr, dgamma, dbeta, rows, cols);
  for (int64_t i = 0; i < rows; ++i) {
    const float* h = xhat + i * cols;
    const float* g = dy + i * cols;
    double su = 0.0, suh = 0.0;
    for (int64_t j = 0; j < cols; ++j) {
      const double u = gamma ? static_cast<double>(g[j]) * gamma[j] : g[j];
      su += u;
      suh += u * h[j];
    }
    const double mu = su / static_cast<double>(cols), muh = suh / static_cast<double>(cols);
    for (int64_t j = 0; j < cols; ++j) {
      const double u = gamma ? static_cast<double>(g[j]) * gamma[j] : g[j];
      const float ds = static_cast<float>(rstd[i] * (u - mu - h[j] * muh));
      dx[i * cols + j] = accumulate_dx ? dx[i * cols + j] + ds : ds;
      if (dr) dr[i * cols + j] = accumulate_dr ? dr[i * cols + j] + ds : ds;
    }
  }
  for (int64_t j = 0; j < cols; ++j) {
    double sg = 0.0, sb = 0.0;
    for (int64_t i = 0; i < rows; ++i) {
      sg += static_cast<double>(dy[i * cols + j]) * xhat[i * cols + j];
      sb += dy[i * cols + j];
    }
    if (dgamma) dgamma[j] = static_cast<float>(sg);
    if (dbeta) dbeta[j] = static_cast<float>(sb);
  }
}

}  // namespace headlab

namespace headlab {

void Kernels::heads_split(const float* x, float* y, int64_t batch, int64_t len, int64_t parts,
                          int64_t heads, int64_t dim) const {
  if (backend() != Backend::reference)
    return fast::heads_split(x, y, batch, len, parts, heads, dim);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < len; ++t)
      for (int64_t p = 0; p < parts; ++p)
        for (int64_t i = 0; i < heads; ++i)
          for (int64_t e = 0; e < dim; ++e)
            y[(((p * batch + b) * heads + i) * len + t) * dim + e] =
                x[((b * len + t) * parts + p) * heads * dim + i * dim + e];
}

void Kernels::heads_merge(const float* y, float* x, bool accumulate, int64_t batch, int64_t len,
                          int64_t parts, int64_t heads, int64_t dim) const {
  if (backend() != Backend::reference)
    return fast::heads_merge(y, x, accumulate, batch, len, parts, heads, dim);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < len; ++t)
      for (int64_t p = 0; p < parts; ++p)
        for (int64_t i = 0; i < heads; ++i)
          for (int64_t e = 0; e < dim; ++e) {
            const float v = y[(((p * batch + b) * heads + i) * len + t) * dim + e];
            float& dst = x[((b * len + t) * parts + p) * heads * dim + i * dim + e];
            dst = accumulate ? dst + v : v;
          }
}

void Kernels::attention_softmax_forward(float* s, float* p_drop, const float* dropout_mask,
                                        const float* key_padding_mask, const float* attn_mask,
                                        int64_t batch, int64_t heads, int64_t len,
                                        int64_t keys) const {
  if (backend() != Backend::reference)
    return fast::attention_softmax_forward(s, p_drop, dropout_mask, key_padding_mask, attn_mask,
                                           batch, heads, len, keys);
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  for (int64_t r = 0; r < batch * heads * len; ++r) {
    const int64_t b = r / (heads * len), t = r % len;
    float* row = s + r * keys;
    for (int64_t j = 0; j < keys; ++j) {
      const bool masked = (key_padding_mask && key_padding_mask[b * keys + j] != 0.0f) ||
                          (attn_mask && attn_mask[t * keys + j] != 0.0f);
      if (masked) row[j] = kNegInf;
    }
    softmax_forward(row, row, 1, keys);  // the reference row softmax (zeros when all masked)
    if (dropout_mask)
      for (int64_t j = 0; j < keys; ++j) p_drop[r * keys + j] = row[j] * dropout_mask[r * keys + j];
  }
}

void Kernels::attention_softmax_backward(const float* p, float* dp, const float* dropout_mask,
                                         int64_t rows, int64_t keys) const {
  if (backend() != Backend::reference)
    return fast::attention_softmax_backward(p, dp, dropout_mask, rows, keys);
  for (int64_t r = 0; r < rows; ++r) {
    float* g = dp + r * keys;
    const float* pr = p + r * keys;
    if (dropout_mask)
      for (int64_t j = 0; j < keys; ++j) g[j] *= dropout_mask[r * keys + j];
    double dot = 0.0;
    for (int64_t j = 0; j < keys; ++j) dot += static_cast<double>(pr[j]) * g[j];
    for (int64_t j = 0; j < keys; ++j) g[j] = static_cast<float>(pr[j] * (g[j] - dot));
  }
}

}  // namespace headlab
