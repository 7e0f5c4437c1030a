#include "train/analysis/head_metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"

namespace headlab {

HeadMetricsAccumulator::HeadMetricsAccumulator(int layers, int heads, int relations, bool mass_only)
    : layers_(layers), heads_(heads), relations_(relations), mass_only_(mass_only) {
  if (layers <= 0 || heads <= 0 || relations <= 0) {
    fail("head_metrics: layers, heads and relations must be positive but are {}, {}, {}", layers,
         heads, relations);
  }
  mass_sum_ = HeadRelationMatrix(layers, heads, relations);
  distinct_sum_ = mass_sum_;
  argmax_hits_ = mass_sum_;
  confidence_sum_.assign(static_cast<size_t>(layers) * heads, 0.0);
  entropy_sum_ = confidence_sum_;
  relation_queries_.assign(static_cast<size_t>(relations), 0);
}

std::vector<uint8_t> labelled_tokens(const Batch& batch) {
  std::vector<uint8_t> counted(batch.labels.size());
  for (size_t q = 0; q < counted.size(); ++q) counted[q] = batch.labels[q] != kIgnoreIndex;
  return counted;
}

void check_attention_inputs(int layers, int heads, int relations, std::span<const Tensor> attention,
                            std::span<const std::vector<int32_t>> partners,
                            std::span<const uint8_t> counted) {
  if (static_cast<int>(attention.size()) != layers) {
    fail("head_metrics: got attention for {} layers but expected {}", attention.size(), layers);
  }
  if (static_cast<int>(partners.size()) != relations) {
    fail("head_metrics: got partners for {} relations but expected {}", partners.size(), relations);
  }
  const Shape& s0 = attention[0].shape();
  if (s0.rank() != 4 || s0[1] != heads || s0[2] != s0[3]) {
    fail("head_metrics: attention shape is {} but expected [B, {}, T, T]", s0.str(), heads);
  }
  const int64_t B = s0[0], T = s0[2];
  for (const Tensor& a : attention) check_shape("head_metrics", "attention", a.shape(), s0);
  const size_t n = static_cast<size_t>(B * T);
  if (counted.size() != n)
    fail("head_metrics: mask has {} entries but expected B*T = {}", counted.size(), n);
  for (const auto& p : partners) {
    if (p.size() != n)
      fail("head_metrics: partners have {} entries but expected B*T = {}", p.size(), n);
  }
  for (size_t q = 0; q < n; ++q) {
    if (!counted[q]) continue;
    for (int r = 0; r < relations; ++r) {
      const int32_t p = partners[r][q];
      if ((p < 0 && p != kNoPartner) || p >= T) {
        fail(
            "head_metrics: partner {} of relation {} at batch {} position {} is outside [0, {}) "
            "and not {} (no partner)",
            p, r, static_cast<int64_t>(q) / T, static_cast<int64_t>(q) % T, T, kNoPartner);
      }
    }
  }
}

void HeadMetricsAccumulator::add(std::span<const Tensor> attention,
                                 std::span<const std::vector<int32_t>> partners,
                                 std::span<const uint8_t> counted) {
  check_attention_inputs(layers_, heads_, relations_, attention, partners, counted);
  const int64_t B = attention[0].size(0), T = attention[0].size(2);
  std::vector<int32_t> p(relations_);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t i = 0; i < T; ++i) {
      const size_t q = static_cast<size_t>(b * T + i);
      if (!counted[q]) continue;
      bool distinct = true;
      for (int r = 0; r < relations_; ++r) {
        p[r] = partners[r][q];
        if (p[r] <= 0) distinct = false;  // BOS or no partner
        for (int s = 0; s < r; ++s) distinct = distinct && p[s] != p[r];
        if (p[r] >= 0) ++relation_queries_[r];
      }
      ++queries_;
      if (distinct) ++distinct_queries_;
      for (int l = 0; l < layers_; ++l) {
        for (int h = 0; h < heads_; ++h) {
          const float* row = attention[l].data() + ((b * heads_ + h) * T + i) * T;
          if (mass_only_) {
            for (int r = 0; r < relations_; ++r) {
              if (p[r] < 0) continue;
              mass_sum_.at(l, h, r) += row[p[r]];
              if (distinct) distinct_sum_.at(l, h, r) += row[p[r]];
            }
            continue;
          }
          int64_t best = 0;
          double entropy = 0.0;
          for (int64_t j = 0; j < T; ++j) {
            if (row[j] > row[best]) best = j;
            if (row[j] > 0.0f) entropy -= static_cast<double>(row[j]) * std::log(row[j]);
          }
          confidence_sum_[l * heads_ + h] += row[best];
          entropy_sum_[l * heads_ + h] += entropy;
          for (int r = 0; r < relations_; ++r) {
            if (p[r] < 0) continue;
            mass_sum_.at(l, h, r) += row[p[r]];
            if (distinct) distinct_sum_.at(l, h, r) += row[p[r]];
            if (best == p[r]) argmax_hits_.at(l, h, r) += 1.0;
          }
        }
      }
    }
  }
}

HeadMetrics HeadMetricsAccumulator::finish() const {
  HeadMetrics m;
  m.layers = layers_;
  m.heads = heads_;
  m.relations = relations_;
  m.queries = queries_;
  m.distinct_queries = distinct_queries_;
  m.relation_queries = relation_queries_;
  const double inv = queries_ > 0 ? 1.0 / static_cast<double>(queries_) : 0.0;
  const double inv_distinct =
      distinct_queries_ > 0 ? 1.0 / static_cast<double>(distinct_queries_) : 0.0;
  m.mass = mass_sum_;
  m.mass_distinct = distinct_sum_;
  m.argmax_accuracy = argmax_hits_;
  for (double& v : m.mass_distinct.values) v *= inv_distinct;
  for (int l = 0; l < layers_; ++l)
    for (int h = 0; h < heads_; ++h)
      for (int r = 0; r < relations_; ++r) {
        const int64_t n = relation_queries_[r];
        const double inv_r = n > 0 ? 1.0 / static_cast<double>(n) : 0.0;
        m.mass.at(l, h, r) *= inv_r;
        m.argmax_accuracy.at(l, h, r) *= inv_r;
      }
  m.confidence = confidence_sum_;
  m.entropy = entropy_sum_;
  for (double& v : m.confidence) v *= inv;
  for (double& v : m.entropy) v *= inv;
  return m;
}

namespace {

double s_max(const HeadRelationMatrix& mass) {
  const int R = mass.relations;
  double sum = 0.0;
  for (int r = 0; r < R; ++r) {
    double best = 0.0;
    for (int l = 0; l < mass.layers; ++l)
      for (int h = 0; h < mass.heads; ++h) best = std::max(best, mass.at(l, h, r));
    sum += best / R;
  }
  return sum;
}

// The best one-to-one assignment of relations to heads: fills out.s_match and out.assignment.
//
// dp[k][S] = best total mass assigning exactly the relations in S to distinct heads among the
// first k heads. choice[k][S] = relation given to head k-1 on the way to (k, S), or -1 when
// head k-1 took none. Relations outside the final S are unassigned and contribute 0; masses
// are >= 0, so the best S is usually the full set but we take the max over all S anyway.
void best_assignment(const HeadRelationMatrix& mass, Specialization& out) {
  const int R = mass.relations;
  const int N = mass.layers * mass.heads;
  const size_t subsets = size_t{1} << R;
  constexpr double kNone = -std::numeric_limits<double>::infinity();
  std::vector<double> dp((static_cast<size_t>(N) + 1) * subsets, kNone);
  std::vector<int8_t> choice((static_cast<size_t>(N) + 1) * subsets, -1);
  dp[0] = 0.0;
  for (int k = 0; k < N; ++k) {
    const int l = k / mass.heads, h = k % mass.heads;
    const double* prev = &dp[static_cast<size_t>(k) * subsets];
    double* next = &dp[static_cast<size_t>(k + 1) * subsets];
    int8_t* pick = &choice[static_cast<size_t>(k + 1) * subsets];
    for (size_t S = 0; S < subsets; ++S) {
      if (prev[S] == kNone) continue;
      if (prev[S] > next[S]) {
        next[S] = prev[S];
        pick[S] = -1;
      }
      for (int r = 0; r < R; ++r) {
        if (S & (size_t{1} << r)) continue;
        const size_t T = S | (size_t{1} << r);
        const double v = prev[S] + mass.at(l, h, r);
        if (v > next[T]) {
          next[T] = v;
          pick[T] = static_cast<int8_t>(r);
        }
      }
    }
  }
  const double* last = &dp[static_cast<size_t>(N) * subsets];
  size_t best_set = 0;
  for (size_t S = 1; S < subsets; ++S)
    if (last[S] > last[best_set]) best_set = S;
  out.s_match = last[best_set] / R;
  out.assignment.assign(R, HeadRef{});
  size_t S = best_set;
  for (int k = N; k > 0; --k) {  // walk the choices back from the best final set
    const int8_t r = choice[static_cast<size_t>(k) * subsets + S];
    if (r < 0) continue;
    out.assignment[r] = HeadRef{(k - 1) / mass.heads, (k - 1) % mass.heads};
    S &= ~(size_t{1} << r);
  }
  HEADLAB_ASSERT(S == 0);
}

}  // namespace

Specialization specialization(const HeadRelationMatrix& mass, double claim_threshold) {
  const int R = mass.relations;
  if (R <= 0 || R > 16) fail("specialization: {} relations but expected 1..16", R);
  Specialization out;
  out.claim_threshold = claim_threshold;
  out.s_max = s_max(mass);
  best_assignment(mass, out);
  for (int r = 0; r < R; ++r) {
    const HeadRef a = out.assignment[r];
    if (a.valid() && mass.at(a.layer, a.head, r) > claim_threshold) ++out.n_claimed;
  }
  return out;
}

std::vector<std::vector<HeadRef>> relation_groups(const HeadRelationMatrix& mass, double min_mass) {
  std::vector<std::vector<HeadRef>> groups(mass.relations);
  for (int l = 0; l < mass.layers; ++l) {
    for (int h = 0; h < mass.heads; ++h) {
      int best = 0;
      for (int r = 1; r < mass.relations; ++r)
        if (mass.at(l, h, r) > mass.at(l, h, best)) best = r;
      if (mass.at(l, h, best) > min_mass) groups[best].push_back(HeadRef{l, h});
    }
  }
  return groups;
}

std::vector<std::vector<float>> gates_without(int layers, int heads, std::span<const HeadRef> off) {
  std::vector<std::vector<float>> gates(layers, std::vector<float>(heads, 1.0f));
  for (const HeadRef& ref : off) {
    if (ref.layer < 0 || ref.layer >= layers || ref.head < 0 || ref.head >= heads) {
      fail("head gates: head ({}, {}) is outside {} layers x {} heads", ref.layer, ref.head, layers,
           heads);
    }
    gates[ref.layer][ref.head] = 0.0f;
  }
  return gates;
}

std::vector<std::vector<float>> gates_keep_only(int layers, int heads, HeadRef keep) {
  if (keep.layer < 0 || keep.layer >= layers || keep.head < 0 || keep.head >= heads) {
    fail("head gates: head ({}, {}) is outside {} layers x {} heads", keep.layer, keep.head, layers,
         heads);
  }
  std::vector<std::vector<float>> gates(layers, std::vector<float>(heads, 1.0f));
  std::fill(gates[keep.layer].begin(), gates[keep.layer].end(), 0.0f);
  gates[keep.layer][keep.head] = 1.0f;
  return gates;
}

LabelAccuracy label_accuracy(const EvalCounts& counts) {
  return {counts.accuracy(), counts.relation_accuracy(), counts.tokens};
}

std::vector<std::vector<double>> group_ablation_drops(const LabelAccuracy& base,
                                                      std::span<const LabelAccuracy> ablated) {
  std::vector<std::vector<double>> drops;
  for (const LabelAccuracy& a : ablated) {
    if (a.component.size() != base.component.size()) {
      fail("group ablation: {} components but the baseline has {}", a.component.size(),
           base.component.size());
    }
    std::vector<double> row(base.component.size());
    for (size_t c = 0; c < row.size(); ++c) row[c] = base.component[c] - a.component[c];
    drops.push_back(std::move(row));
  }
  return drops;
}

}  // namespace headlab
