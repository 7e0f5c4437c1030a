#include "train/analysis/composition.h"

#include <algorithm>

#include "core/error.h"

namespace headlab {

PathMassAccumulator::PathMassAccumulator(int layers, int heads, int relations) {
  if (layers <= 0 || heads <= 0 || relations <= 0)
    fail("path mass: layers, heads and relations must be positive but are {}, {}, {}", layers,
         heads, relations);
  const size_t n = static_cast<size_t>(layers) * heads;
  sum_ = {layers,
          heads,
          relations,
          std::vector<double>(n * n * relations, 0.0),
          std::vector<double>(n * relations, 0.0),
          std::vector<double>(n * relations, 0.0)};
  relation_queries_.assign(static_cast<size_t>(relations), 0);
}

void PathMassAccumulator::add(std::span<const Tensor> attention,
                              std::span<const std::vector<int32_t>> partners,
                              std::span<const uint8_t> counted,
                              std::span<const uint8_t> key_padding) {
  check_attention_inputs(sum_.layers, sum_.heads, sum_.relations, attention, partners, counted);
  const int L = sum_.layers, H = sum_.heads, R = sum_.relations;
  const int64_t B = attention[0].size(0), T = attention[0].size(2);
  const size_t n = static_cast<size_t>(L) * H;
  if (!key_padding.empty() && key_padding.size() != static_cast<size_t>(B * T))
    fail("path mass: key padding has {} entries but expected B*T = {}", key_padding.size(), B * T);
  std::vector<double> column(static_cast<size_t>(T));
  std::vector<uint8_t> visible(static_cast<size_t>(T), 1);
  for (int64_t b = 0; b < B; ++b) {
    add_uniform(attention, partners, counted, key_padding, b, column);
    int64_t seen = T;  // keys of sequence b a uniform lower head spreads over
    if (!key_padding.empty()) {
      seen = 0;
      for (int64_t j = 0; j < T; ++j) {
        visible[j] = key_padding[static_cast<size_t>(b * T + j)] == 0 ? 1 : 0;
        seen += visible[j];
      }
    }
    for (int64_t i = 0; i < T; ++i) {
      const size_t q = static_cast<size_t>(b * T + i);
      if (!counted[q]) continue;
      ++queries_;
      for (int r = 0; r < R; ++r) relation_queries_[r] += partners[r][q] >= 0 ? 1 : 0;
      for (int l2 = 1; l2 < L; ++l2) {
        for (int h2 = 0; h2 < H; ++h2) {
          const float* y = attention[l2].data() + ((b * H + h2) * T + i) * T;  // A_Y[i, :]
          double* lower = &sum_.uniform_lower[static_cast<size_t>(l2 * H + h2) * R];
          double y_on_visible = 0.0;  // sum_j A_Y[i, j] over the keys a uniform X sits on
          for (int64_t j = 0; j < T; ++j) y_on_visible += visible[j] ? y[j] : 0.0;
          for (int r = 0; r < R; ++r) {
            const int32_t p = partners[r][q];
            if (p >= 0 && seen > 0 && visible[p])
              lower[r] += y_on_visible / static_cast<double>(seen);
          }
          for (int l1 = 0; l1 < l2; ++l1) {
            for (int h1 = 0; h1 < H; ++h1) {
              const float* x = attention[l1].data() + (b * H + h1) * T * T;  // A_X[:, :]
              double* out = &sum_.values[((l2 * H + h2) * n + l1 * H + h1) * R];
              for (int r = 0; r < R; ++r) {
                const int32_t p = partners[r][q];
                if (p < 0) continue;  // no partner for r: not one of r's queries
                double s = 0.0;
                for (int64_t j = 0; j < T; ++j) s += static_cast<double>(y[j]) * x[j * T + p];
                out[r] += s;
              }
            }
          }
        }
      }
    }
  }
}

// The uniform-Y baseline of sequence b: a key padding mask is per sequence, so every query of b
// sees the same keys and sum_{j visible} A_X[j, k] is one column sum per (X, k), computed once.
void PathMassAccumulator::add_uniform(std::span<const Tensor> attention,
                                      std::span<const std::vector<int32_t>> partners,
                                      std::span<const uint8_t> counted,
                                      std::span<const uint8_t> key_padding, int64_t b,
                                      std::vector<double>& column) {
  const int L = sum_.layers, H = sum_.heads, R = sum_.relations;
  const int64_t T = attention[0].size(2);
  std::vector<uint8_t> visible(static_cast<size_t>(T), 1);
  int64_t seen = T;
  if (!key_padding.empty()) {
    seen = 0;
    for (int64_t j = 0; j < T; ++j) {
      visible[j] = key_padding[static_cast<size_t>(b * T + j)] == 0 ? 1 : 0;
      seen += visible[j];
    }
  }
  if (seen == 0) return;  // no query of b can attend anywhere: no uniform head exists
  for (int l = 0; l + 1 < L; ++l) {
    for (int h = 0; h < H; ++h) {
      const float* x = attention[l].data() + (b * H + h) * T * T;  // A_X[:, :]
      std::fill(column.begin(), column.end(), 0.0);
      for (int64_t j = 0; j < T; ++j)
        if (visible[j])
          for (int64_t k = 0; k < T; ++k) column[k] += x[j * T + k];
      double* out = &sum_.uniform[static_cast<size_t>(l * H + h) * R];
      for (int64_t i = 0; i < T; ++i) {
        const size_t q = static_cast<size_t>(b * T + i);
        if (!counted[q]) continue;
        for (int r = 0; r < R; ++r)
          if (partners[r][q] >= 0) out[r] += column[partners[r][q]] / static_cast<double>(seen);
      }
    }
  }
}

PathMass PathMassAccumulator::finish() const {
  PathMass out = sum_;
  // Relation r's masses average over the queries with a partner for r (as head_metrics.h).
  const auto R = static_cast<size_t>(sum_.relations);
  std::vector<double> inv(R, 0.0);
  for (size_t r = 0; r < R; ++r)
    if (relation_queries_.size() == R && relation_queries_[r] > 0)
      inv[r] = 1.0 / static_cast<double>(relation_queries_[r]);
  for (size_t k = 0; k < out.values.size(); ++k) out.values[k] *= inv[k % R];
  for (size_t k = 0; k < out.uniform.size(); ++k) out.uniform[k] *= inv[k % R];
  for (size_t k = 0; k < out.uniform_lower.size(); ++k) out.uniform_lower[k] *= inv[k % R];
  return out;
}

std::vector<HeadComposition> compositions(const HeadRelationMatrix& base, const PathMass& paths,
                                          const std::vector<HeadRelationMatrix>& ablated) {
  const int L = base.layers, H = base.heads, R = base.relations;
  if (L < 2) return {};
  if (paths.layers != L || paths.heads != H || paths.relations != R)
    fail("composition: path masses are {} x {} x {} but the masses {} x {} x {}", paths.layers,
         paths.heads, paths.relations, L, H, R);
  if (static_cast<int>(ablated.size()) != (L - 1) * H)
    fail("composition: {} ablated mass matrices but {} heads below the last layer", ablated.size(),
         (L - 1) * H);
  for (const HeadRelationMatrix& m : ablated)
    if (m.layers != L || m.heads != H || m.relations != R)
      fail("composition: an ablated mass matrix is {} x {} x {} but expected {} x {} x {}",
           m.layers, m.heads, m.relations, L, H, R);
  std::vector<HeadComposition> out;
  for (int l = 1; l < L; ++l) {
    for (int h = 0; h < H; ++h) {
      HeadComposition c;
      c.head = {l, h};
      for (int k = 0; k < l * H; ++k)
        for (int r = 0; r < R; ++r)
          if (!c.composes_with.valid() || paths.at(c.head, {k / H, k % H}, r) > c.path_mass) {
            c.composes_with = {k / H, k % H};
            c.relation = r;
            c.path_mass = paths.at(c.head, c.composes_with, r);
          }
      c.mass = base.at(l, h, c.relation);
      c.path_mass_baseline = paths.baseline(c.composes_with, c.relation);
      c.path_mass_lower_baseline = paths.lower_baseline(c.head, c.relation);
      c.claimed = c.path_mass >
                  std::max(c.path_mass_baseline, c.path_mass_lower_baseline) + kCompositionMargin;
      for (int k = 0; k < l * H; ++k) {
        const HeadRef x{k / H, k % H};
        c.sources.push_back({x, paths.at(c.head, x, c.relation), ablated[k].at(l, h, c.relation),
                             paths.baseline(x, c.relation)});
      }
      out.push_back(std::move(c));
    }
  }
  return out;
}

}  // namespace headlab
