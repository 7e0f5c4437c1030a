// The fused kernels of the Kernels base class (see core/kernels/kernels.h): plain loops with double
// accumulation for the reference backend, the vectorized loops of fast.h for blas and
// onednn, and for onednn a matmul with its bias and ReLU fused (onednn_fused.cpp).

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/error.h"
#include "core/kernels/fast.h"
#include "core/kernels/kernels.h"

namespace headlab {

// Defined in onednn_fused.cpp.
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

// Reference attention per (batch item, head), in double, straight from the formulas.
namespace {

struct RefHead {
  const AttentionDesc& d;
  int64_t b, i;
  // Element e of token t's Q (part 0), K (1) or V (2), and of token t's output row.
  int64_t at(int64_t part, int64_t t, int64_t e) const {
    return ((b * d.len + t) * 3 + part) * d.heads * d.dim + i * d.dim + e;
  }
  int64_t out_at(int64_t t, int64_t e) const {
    return (b * d.len + t) * d.heads * d.dim + i * d.dim + e;
  }
  int64_t p_at(int64_t t, int64_t s) const {
    return ((b * d.heads + i) * d.len + t) * d.len + s;
  }
};

}  // namespace

void Kernels::attention_forward(const AttentionDesc& d, const float* qkv, float* p,
                                float* p_drop, float* out) const {
  if (backend() != Backend::reference) return fast::attention_forward(d, qkv, p, p_drop, out);
  const int64_t t_len = d.len;
  std::vector<double> row(static_cast<size_t>(t_len));
  for (int64_t b = 0; b < d.batch; ++b)
    for (int64_t i = 0; i < d.heads; ++i) {
      const RefHead h{d, b, i};
      for (int64_t t = 0; t < t_len; ++t) {
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t s = 0; s < t_len; ++s) {
          const bool masked = (d.key_padding_mask && d.key_padding_mask[b * t_len + s] != 0.0f) ||
                              (d.attn_mask && d.attn_mask[t * t_len + s] != 0.0f);
          double acc = 0.0;
          for (int64_t e = 0; e < d.dim; ++e)
            acc += static_cast<double>(qkv[h.at(0, t, e)]) * qkv[h.at(1, s, e)];
          row[s] = masked ? -std::numeric_limits<double>::infinity() : d.scale * acc;
          mx = std::max(mx, row[s]);
        }
        double sum = 0.0;
        for (int64_t s = 0; s < t_len; ++s) {
          row[s] = std::isinf(mx) ? 0.0 : std::exp(row[s] - mx);
          sum += row[s];
        }
        for (int64_t s = 0; s < t_len; ++s) {
          const float pv = sum > 0.0 ? static_cast<float>(row[s] / sum) : 0.0f;
          p[h.p_at(t, s)] = pv;
          if (d.dropout_mask) p_drop[h.p_at(t, s)] = pv * d.dropout_mask[h.p_at(t, s)];
        }
      }
      const float* pp = d.dropout_mask ? p_drop : p;
      for (int64_t t = 0; t < t_len; ++t)
        for (int64_t e = 0; e < d.dim; ++e) {
          double acc = 0.0;
          for (int64_t s = 0; s < t_len; ++s)
            acc += static_cast<double>(pp[h.p_at(t, s)]) * qkv[h.at(2, s, e)];
          out[h.out_at(t, e)] = static_cast<float>(acc);
        }
    }
}

void Kernels::attention_backward(const AttentionDesc& d, const float* qkv, const float* p,
                                 const float* p_drop, const float* dout, float* dqkv,
                                 bool accumulate) const {
  if (backend() != Backend::reference)
    return fast::attention_backward(d, qkv, p, p_drop, dout, dqkv, accumulate);
  const int64_t t_len = d.len, n = d.dim;
  std::vector<double> ds(static_cast<size_t>(t_len * t_len));
  auto put = [&](int64_t idx, double v) {
    dqkv[idx] = static_cast<float>(accumulate ? dqkv[idx] + v : v);
  };
  for (int64_t b = 0; b < d.batch; ++b)
    for (int64_t i = 0; i < d.heads; ++i) {
      const RefHead h{d, b, i};
      const float* pp = d.dropout_mask ? p_drop : p;
      for (int64_t t = 0; t < t_len; ++t) {  // dP = (dO V^T) * multipliers, then dS
        double dot = 0.0;
        for (int64_t s = 0; s < t_len; ++s) {
          double acc = 0.0;
          for (int64_t e = 0; e < n; ++e)
            acc += static_cast<double>(dout[h.out_at(t, e)]) * qkv[h.at(2, s, e)];
          if (d.dropout_mask) acc *= d.dropout_mask[h.p_at(t, s)];
          ds[t * t_len + s] = acc;
          dot += p[h.p_at(t, s)] * acc;
        }
        for (int64_t s = 0; s < t_len; ++s)
          ds[t * t_len + s] = p[h.p_at(t, s)] * (ds[t * t_len + s] - dot);
      }
      for (int64_t s = 0; s < t_len; ++s)
        for (int64_t e = 0; e < n; ++e) {
          double dv = 0.0, dk = 0.0;
          for (int64_t t = 0; t < t_len; ++t) {
            dv += static_cast<double>(pp[h.p_at(t, s)]) * dout[h.out_at(t, e)];
            dk += ds[t * t_len + s] * qkv[h.at(0, t, e)];
          }
          put(h.at(2, s, e), dv);
          put(h.at(1, s, e), d.scale * dk);
        }
      for (int64_t t = 0; t < t_len; ++t)
        for (int64_t e = 0; e < n; ++e) {
          double dq = 0.0;
          for (int64_t s = 0; s < t_len; ++s) dq += ds[t * t_len + s] * qkv[h.at(1, s, e)];
          put(h.at(0, t, e), d.scale * dq);
        }
    }
}

}  // namespace headlab
