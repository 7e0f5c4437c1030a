#pragma once
// Plain-loop references for the layer tests, in double, written from the formulas (not from
// the ops the layers use). Tensors are read as row-major arrays.

#include <cmath>
#include <cstdint>
#include <vector>

#include "core/rng.h"
#include "core/tensor.h"
#include "layers/multi_head_attention.h"

namespace headlab::testing {

using Vec = std::vector<double>;

inline Tensor randn(const Shape& shape, Rng& rng, float std = 1.0f) {
  Tensor t = Tensor::empty(shape);
  for (float& v : t.span()) v = rng.normal(0.0f, std);
  return t;
}

inline double max_abs_diff(const Tensor& a, const Vec& b) {
  double m = a.numel() == static_cast<int64_t>(b.size()) ? 0.0 : 1e30;
  for (int64_t i = 0; i < a.numel() && i < static_cast<int64_t>(b.size()); ++i)
    m = std::max(m, std::fabs(static_cast<double>(a[i]) - b[i]));
  return m;
}

inline double max_abs_diff(const Tensor& a, const Tensor& b) {
  double m = a.shape() == b.shape() ? 0.0 : 1e30;
  for (int64_t i = 0; i < a.numel() && i < b.numel(); ++i)
    m = std::max(m, std::fabs(static_cast<double>(a[i]) - b[i]));
  return m;
}

// y[r, o] = sum_i x[r, i] w[o, i] + b[o]; x rows of width in, w [out, in].
inline Vec ref_linear(const Vec& x, const Tensor& w, const Tensor* b) {
  const int64_t out = w.size(0), in = w.size(1), rows = static_cast<int64_t>(x.size()) / in;
  Vec y(static_cast<size_t>(rows * out));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out; ++o) {
      double acc = b ? (*b)[o] : 0.0;
      for (int64_t i = 0; i < in; ++i) acc += x[r * in + i] * w[o * in + i];
      y[r * out + o] = acc;
    }
  return y;
}

inline Vec to_vec(const Tensor& t) {
  return Vec(t.span().begin(), t.span().end());
}

// LayerNorm over rows of width d, biased variance.
inline Vec ref_layer_norm(const Vec& x, int64_t d, const Tensor& w, const Tensor& b, double eps) {
  Vec y(x.size());
  for (size_t r = 0; r < x.size() / d; ++r) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < d; ++i) mean += x[r * d + i] / d;
    for (int64_t i = 0; i < d; ++i) var += (x[r * d + i] - mean) * (x[r * d + i] - mean) / d;
    for (int64_t i = 0; i < d; ++i)
      y[r * d + i] = (x[r * d + i] - mean) / std::sqrt(var + eps) * w[i] + b[i];
  }
  return y;
}

struct RefAttention {
  Vec output;   // [B, T, D]
  Vec weights;  // [B, h, T, S]
  // contribution[h]: head h's part of the output, concat slice h times W_o's columns, [B, T, D]
  std::vector<Vec> contribution;
};

// The seed's per-head formula with separate slices W_i^Q, W_i^K, W_i^V of the fused weights:
//   head_i = softmax(Q W_i^Q (K W_i^K)^T / sqrt(d_k) + mask) V W_i^V
//   out = Concat(g_1 head_1, ..., g_h head_h) W^O + b_o
// Masked keys (nonzero mask) are left out of the softmax; a row with no key gives zeros. A
// score_bias [h, T, S] is added to head i's scores (MultiHeadAttention::attention_bias).
inline RefAttention ref_attention(const MultiHeadAttention& mha, const Tensor& query,
                                  const Tensor& key, const Tensor& value,
                                  const Tensor* key_padding_mask, const Tensor* attn_mask,
                                  const std::vector<double>& gate,
                                  const Tensor* score_bias = nullptr) {
  const int64_t B = query.size(0), T = query.size(1), S = key.size(1), D = query.size(2);
  const int64_t H = mha.heads(), d = mha.head_dim();
  // W_Q, W_K, W_V: the row blocks of in_proj_weight [3 H d, D] (b likewise).
  const Tensor &w_in = mha.in_proj_weight.value(), &b_in = mha.in_proj_bias.value();
  const Tensor wq = w_in.slice(0, H * d), wk = w_in.slice(H * d, 2 * H * d),
               wv = w_in.slice(2 * H * d, 3 * H * d), &wo = mha.w_o->weight.value();
  const Tensor bq = b_in.slice(0, H * d), bk = b_in.slice(H * d, 2 * H * d),
               bv = b_in.slice(2 * H * d, 3 * H * d), &bo = mha.w_o->bias.value();
  // x [rows, D] @ W_i ([D, d], column c is fused row i*d + c) + b_i
  auto project = [&](const Tensor& x, int64_t b, int64_t n, const Tensor& w, const Tensor& bias,
                     int64_t i) {
    Vec y(static_cast<size_t>(n * d));
    for (int64_t t = 0; t < n; ++t)
      for (int64_t c = 0; c < d; ++c) {
        double acc = bias[i * d + c];
        for (int64_t m = 0; m < D; ++m) acc += x[(b * n + t) * D + m] * w[(i * d + c) * D + m];
        y[t * d + c] = acc;
      }
    return y;
  };
  RefAttention r;
  r.output.assign(static_cast<size_t>(B * T * D), 0.0);
  r.weights.assign(static_cast<size_t>(B * H * T * S), 0.0);
  r.contribution.assign(static_cast<size_t>(H), Vec(static_cast<size_t>(B * T * D), 0.0));
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t i = 0; i < H; ++i) {
      const Vec q = project(query, b, T, wq, bq, i), k = project(key, b, S, wk, bk, i),
                v = project(value, b, S, wv, bv, i);
      for (int64_t t = 0; t < T; ++t) {
        Vec score(static_cast<size_t>(S), 0.0);
        std::vector<bool> keep(static_cast<size_t>(S), true);
        double mx = -1e300;
        for (int64_t s = 0; s < S; ++s) {
          if (key_padding_mask && (*key_padding_mask)[b * S + s] != 0) keep[s] = false;
          if (attn_mask && (*attn_mask)[t * S + s] != 0) keep[s] = false;
          for (int64_t c = 0; c < d; ++c) score[s] += q[t * d + c] * k[s * d + c];
          score[s] /= std::sqrt(static_cast<double>(d));
          if (score_bias) score[s] += (*score_bias)[(i * T + t) * S + s];
          if (keep[s]) mx = std::max(mx, score[s]);
        }
        double z = 0;
        for (int64_t s = 0; s < S; ++s) z += keep[s] ? std::exp(score[s] - mx) : 0.0;
        Vec head(static_cast<size_t>(d), 0.0);
        for (int64_t s = 0; s < S; ++s) {
          const double a = keep[s] ? std::exp(score[s] - mx) / z : 0.0;
          r.weights[((b * H + i) * T + t) * S + s] = a;
          for (int64_t c = 0; c < d; ++c) head[c] += a * v[s * d + c];
        }
        // head_i times its columns of W^O, without bias.
        for (int64_t j = 0; j < D; ++j) {
          double acc = 0;
          for (int64_t c = 0; c < d; ++c) acc += head[c] * wo[j * (H * d) + i * d + c];
          r.contribution[i][(b * T + t) * D + j] = acc;
          r.output[(b * T + t) * D + j] += gate[i] * acc;
        }
      }
    }
    for (int64_t t = 0; t < T; ++t)
      for (int64_t j = 0; j < D; ++j) r.output[(b * T + t) * D + j] += bo[j];
  }
  return r;
}

}  // namespace headlab::testing
