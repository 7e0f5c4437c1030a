// The readable attention of ReferenceKernels: per (batch item, head), in double, straight from
// the formulas at Kernels::attention_forward / attention_backward, on the packed layouts
// described at AttentionDesc (kernels.h). The oracle of attention_fast.cpp.

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/kernels/backends.h"

namespace headlab {
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
  int64_t p_at(int64_t t, int64_t s) const { return ((b * d.heads + i) * d.len + t) * d.len + s; }
};

}  // namespace

void ReferenceKernels::attention_forward(const AttentionDesc& d, const float* qkv, float* p,
                                         float* p_drop, float* out) const {
  detail::observe_attention(d, false);
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

void ReferenceKernels::attention_backward(const AttentionDesc& d, const float* qkv, const float* p,
                                          const float* p_drop, const float* dout, float* dqkv,
                                          bool accumulate) const {
  detail::observe_attention(d, true);
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
