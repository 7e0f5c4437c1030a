#include "train/analysis/baselines.h"

#include <cmath>

#include "core/error.h"

namespace headlab {

ChanceBaselineAccumulator::ChanceBaselineAccumulator(int relations) : relations_(relations) {
  if (relations <= 0) fail("baselines: relations must be positive but are {}", relations);
  uniform_sum_.assign(static_cast<size_t>(relations), 0.0);
  distinct_sum_ = uniform_sum_;
  offset_hits_.resize(static_cast<size_t>(relations));
  relation_queries_.assign(static_cast<size_t>(relations), 0);
}

void ChanceBaselineAccumulator::add(int64_t B, int64_t T,
                                    std::span<const std::vector<int32_t>> partners,
                                    std::span<const uint8_t> counted,
                                    std::span<const uint8_t> key_padding) {
  const size_t n = static_cast<size_t>(B * T);
  if (static_cast<int>(partners.size()) != relations_)
    fail("baselines: got partners for {} relations but expected {}", partners.size(), relations_);
  if (counted.size() != n)
    fail("baselines: mask has {} entries but expected B*T = {}", counted.size(), n);
  if (!key_padding.empty() && key_padding.size() != n)
    fail("baselines: key padding has {} entries but expected B*T = {}", key_padding.size(), n);
  for (const auto& p : partners)
    if (p.size() != n)
      fail("baselines: partners have {} entries but expected B*T = {}", p.size(), n);
  if (T - 1 > max_offset_) {  // re-centre the offset tables on the larger range
    for (auto& hits : offset_hits_) {
      std::vector<int64_t> grown(static_cast<size_t>(2 * (T - 1) + 1), 0);
      for (size_t k = 0; k < hits.size(); ++k) grown[k + (T - 1 - max_offset_)] = hits[k];
      hits = std::move(grown);
    }
    max_offset_ = T - 1;
  }
  const auto padded = [&](int64_t b, int64_t j) {
    return !key_padding.empty() && key_padding[static_cast<size_t>(b * T + j)] != 0;
  };
  std::vector<int32_t> p(static_cast<size_t>(relations_));
  for (int64_t b = 0; b < B; ++b) {
    // A key padding mask is per sequence: every query of b sees the same keys.
    int64_t visible = 0;
    for (int64_t j = 0; j < T; ++j) visible += padded(b, j) ? 0 : 1;
    for (int64_t i = 0; i < T; ++i) {
      const size_t q = static_cast<size_t>(b * T + i);
      if (!counted[q]) continue;
      if (visible == 0) fail("baselines: query {} of sequence {} sees no key", i, b);
      bool distinct = true;
      for (int r = 0; r < relations_; ++r) {
        p[r] = partners[r][q];
        if ((p[r] < 0 && p[r] != kNoPartner) || p[r] >= T)
          fail(
              "baselines: partner {} of relation {} at batch {} position {} is outside [0, {}) "
              "and not {} (no partner)",
              p[r], r, b, i, T, kNoPartner);
        // As HeadMetricsAccumulator: BOS is no real partner, nor is none.
        if (p[r] <= 0) distinct = false;
        for (int s = 0; s < r; ++s) distinct = distinct && p[s] != p[r];
        if (p[r] >= 0) ++relation_queries_[r];
      }
      ++queries_;
      if (distinct) ++distinct_queries_;
      for (int r = 0; r < relations_; ++r) {
        if (p[r] < 0 || padded(b, p[r]))
          continue;  // no head can attend there: neither baseline hits it
        const double u = 1.0 / static_cast<double>(visible);
        uniform_sum_[r] += u;
        if (distinct) distinct_sum_[r] += u;
        ++offset_hits_[r][static_cast<size_t>(p[r] - i + max_offset_)];
      }
    }
  }
}

ChanceBaselines ChanceBaselineAccumulator::finish() const {
  ChanceBaselines out;
  out.queries = queries_;
  out.distinct_queries = distinct_queries_;
  out.relation_queries = relation_queries_;
  const double inv_distinct =
      distinct_queries_ > 0 ? 1.0 / static_cast<double>(distinct_queries_) : 0.0;
  for (int r = 0; r < relations_; ++r) {
    const int64_t n = relation_queries_[r];
    const double inv = n > 0 ? 1.0 / static_cast<double>(n) : 0.0;
    out.mass_uniform.push_back(uniform_sum_[r] * inv);
    out.mass_distinct_uniform.push_back(distinct_sum_[r] * inv_distinct);
    int64_t best = 0, best_hits = -1;
    const std::vector<int64_t>& hits = offset_hits_[r];
    for (size_t k = 0; k < hits.size(); ++k) {
      if (hits[k] > best_hits) {
        best_hits = hits[k];
        best = static_cast<int64_t>(k) - max_offset_;
      }
    }
    out.argmax_offset.push_back(best_hits > 0 ? static_cast<double>(best_hits) * inv : 0.0);
    out.argmax_offset_offset.push_back(best_hits > 0 ? best : 0);
  }
  return out;
}

AccuracySpread accuracy_spread(std::span<const EvalCounts> per_batch) {
  AccuracySpread s;
  s.batches = static_cast<int64_t>(per_batch.size());
  if (per_batch.empty()) return s;
  for (const EvalCounts& c : per_batch) s.mean += c.accuracy();
  s.mean /= static_cast<double>(s.batches);
  if (s.batches < 2) return s;
  double sq = 0.0;
  for (const EvalCounts& c : per_batch) sq += (c.accuracy() - s.mean) * (c.accuracy() - s.mean);
  s.sd = std::sqrt(sq / static_cast<double>(s.batches - 1));
  s.standard_error = s.sd / std::sqrt(static_cast<double>(s.batches));
  s.drop_baseline = 2.0 * s.standard_error;
  s.defined = true;
  return s;
}

std::vector<BestHead> best_heads(const HeadRelationMatrix& argmax_accuracy,
                                 const ChanceBaselines& baselines) {
  const int R = argmax_accuracy.relations;
  if (static_cast<int>(baselines.argmax_offset.size()) != R ||
      static_cast<int>(baselines.argmax_offset_offset.size()) != R)
    fail("best heads: the baselines have {} relations but the argmax accuracies {}",
         baselines.argmax_offset.size(), R);
  std::vector<BestHead> out;
  for (int r = 0; r < R; ++r) {
    BestHead b;
    for (int l = 0; l < argmax_accuracy.layers; ++l)
      for (int h = 0; h < argmax_accuracy.heads; ++h)
        if (!b.head.valid() || argmax_accuracy.at(l, h, r) > b.argmax_accuracy) {
          b.head = {l, h};
          b.argmax_accuracy = argmax_accuracy.at(l, h, r);
        }
    b.offset_baseline = baselines.argmax_offset[r];
    b.offset = baselines.argmax_offset_offset[r];
    b.margin = b.argmax_accuracy - b.offset_baseline;
    out.push_back(b);
  }
  return out;
}

}  // namespace headlab
