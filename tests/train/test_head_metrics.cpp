// Head metrics on hand-built attention tensors whose answers are known by construction, and the
// exact assignment behind s_match against an independent brute-force search.

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "tests/train/toy_partners.h"
#include "train/analysis/head_metrics.h"
#include "train/tasks/dependency.h"

using namespace headlab;

namespace {

using namespace toy_partners;

// Head 0 puts all mass on PREV; head 1 is uniform; head 2 puts 0.7 on FAR and 0.3 on BOS.
Tensor make_attention(const std::vector<std::vector<int32_t>>& p) {
  Tensor a = Tensor::zeros({B, 3, T, T});
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t i = 0; i < T; ++i) {
      const int64_t q = b * T + i;
      float* h0 = a.data() + ((b * 3 + 0) * T + i) * T;
      float* h1 = a.data() + ((b * 3 + 1) * T + i) * T;
      float* h2 = a.data() + ((b * 3 + 2) * T + i) * T;
      h0[i == 0 ? 0 : p[0][q]] = 1.0f;
      for (int64_t j = 0; j < T; ++j) h1[j] = 1.0f / T;
      if (i == 0) {
        h2[0] = 1.0f;
      } else {
        h2[p[1][q]] += 0.7f;
        h2[0] += 0.3f;
      }
    }
  }
  return a;
}

// Every one-to-one assignment of relations to distinct heads (or to none), by recursion.
double brute_force_s_match(const HeadRelationMatrix& m) {
  const int N = m.layers * m.heads;
  std::vector<bool> used(N, false);
  double best = 0.0;
  auto rec = [&](auto&& self, int r, double total) -> void {
    if (r == m.relations) {
      best = std::max(best, total);
      return;
    }
    self(self, r + 1, total);  // leave relation r unassigned
    for (int k = 0; k < N; ++k) {
      if (used[k]) continue;
      used[k] = true;
      self(self, r + 1, total + m.at(k / m.heads, k % m.heads, r));
      used[k] = false;
    }
  };
  rec(rec, 0, 0.0);
  return best / m.relations;
}

}  // namespace

TEST_CASE("train: head metrics of hand-built heads (mass, argmax, confidence, entropy)") {
  const auto partners = make_partners();
  const auto mask = non_bos();
  const Tensor layer0 = make_attention(partners);
  HeadMetricsAccumulator acc(1, 3, 2);
  acc.add(std::span<const Tensor>(&layer0, 1), partners, mask);
  const HeadMetrics m = acc.finish();
  REQUIRE(m.queries == B * (T - 1));

  // Head 0 is a pure PREV head.
  CHECK(m.mass.at(0, 0, 0) == doctest::Approx(1.0));
  CHECK(m.argmax_accuracy.at(0, 0, 0) == doctest::Approx(1.0));
  CHECK(m.head_confidence(0, 0) == doctest::Approx(1.0));
  CHECK(m.head_entropy(0, 0) == doctest::Approx(0.0));
  // Its FAR mass is the fraction of queries where FAR coincides with PREV: count it here.
  int coincide = 0;
  for (int64_t q = 0; q < B * T; ++q)
    if (mask[q] && partners[0][q] == partners[1][q]) ++coincide;
  CHECK(m.mass.at(0, 0, 1) == doctest::Approx(static_cast<double>(coincide) / m.queries));

  // Head 1 is uniform: mass 1/T on anything, entropy log T, argmax (ties to lowest j) is BOS,
  // which is the PREV partner only of position 1.
  CHECK(m.mass.at(0, 1, 0) == doctest::Approx(1.0 / T));
  CHECK(m.mass.at(0, 1, 1) == doctest::Approx(1.0 / T));
  CHECK(m.head_entropy(0, 1) == doctest::Approx(std::log(static_cast<double>(T))));
  CHECK(m.head_confidence(0, 1) == doctest::Approx(1.0 / T));
  CHECK(m.argmax_accuracy.at(0, 1, 0) == doctest::Approx(static_cast<double>(B) / m.queries));
  CHECK(m.argmax_accuracy.at(0, 1, 1) == doctest::Approx(0.0));

  // Head 2: 0.7 on FAR, 0.3 on BOS.
  CHECK(m.mass.at(0, 2, 1) == doctest::Approx(0.7));
  CHECK(m.argmax_accuracy.at(0, 2, 1) == doctest::Approx(1.0));
  CHECK(m.head_confidence(0, 2) == doctest::Approx(0.7));
  CHECK(m.head_entropy(0, 2) == doctest::Approx(-(0.7 * std::log(0.7) + 0.3 * std::log(0.3))));
  // PREV of position 1 is BOS (0.3 there), elsewhere PREV gets 0.7 only where it equals FAR.
  double expect = 0.0;
  for (int64_t q = 0; q < B * T; ++q) {
    if (!mask[q]) continue;
    if (partners[0][q] == 0) expect += 0.3;
    if (partners[0][q] == partners[1][q]) expect += 0.7;
  }
  CHECK(m.mass.at(0, 2, 0) == doctest::Approx(expect / m.queries));

  // Distinct-partner mass drops queries with a BOS partner or coinciding partners: on the
  // rest, the PREV head has exactly 0 on FAR and the FAR head exactly 0 on PREV.
  int distinct = 0;
  for (int64_t q = 0; q < B * T; ++q)
    if (mask[q] && partners[0][q] != 0 && partners[0][q] != partners[1][q]) ++distinct;
  CHECK(m.distinct_queries == distinct);
  CHECK(m.mass_distinct.at(0, 0, 0) == doctest::Approx(1.0));
  CHECK(m.mass_distinct.at(0, 0, 1) == doctest::Approx(0.0));
  CHECK(m.mass_distinct.at(0, 2, 0) == doctest::Approx(0.0));
  CHECK(m.mass_distinct.at(0, 2, 1) == doctest::Approx(0.7));
}

TEST_CASE("train: head metrics pool queries over batches and layers") {
  const auto partners = make_partners();
  const auto mask = non_bos();
  const Tensor a = make_attention(partners);
  // Layer 1 is layer 0 with heads 0 and 2 swapped.
  Tensor b = Tensor::empty(a.shape());
  for (int64_t bb = 0; bb < B; ++bb)
    for (int h = 0; h < 3; ++h)
      std::copy_n(a.data() + (bb * 3 + (h == 1 ? 1 : 2 - h)) * T * T, T * T,
                  b.data() + (bb * 3 + h) * T * T);
  const Tensor layers[2] = {a, b};
  HeadMetricsAccumulator acc(2, 3, 2);
  acc.add(layers, partners, mask);
  acc.add(layers, partners, mask);  // same batch twice: averages unchanged, counts double
  const HeadMetrics m = acc.finish();
  CHECK(m.queries == 2 * B * (T - 1));
  CHECK(m.mass.at(1, 2, 0) == doctest::Approx(1.0));
  CHECK(m.mass.at(1, 0, 1) == doctest::Approx(0.7));
  CHECK(m.mass.at(0, 0, 0) == doctest::Approx(1.0));

  const Specialization s = specialization(m.mass);
  CHECK(s.assignment[0].valid());
  CHECK(m.mass.at(s.assignment[0].layer, s.assignment[0].head, 0) == doctest::Approx(1.0));
  CHECK(m.mass.at(s.assignment[1].layer, s.assignment[1].head, 1) == doctest::Approx(0.7));
  CHECK(s.s_match == doctest::Approx(0.85));
  CHECK(s.n_claimed == 2);
}

TEST_CASE("train: head metrics reject wrong shapes and partners") {
  const auto partners = make_partners();
  const auto mask = non_bos();
  const Tensor a = make_attention(partners);
  HeadMetricsAccumulator two_layers(2, 3, 2);
  CHECK_THROWS_AS(two_layers.add(std::span<const Tensor>(&a, 1), partners, mask), Error);
  HeadMetricsAccumulator four_heads(1, 4, 2);
  CHECK_THROWS_AS(four_heads.add(std::span<const Tensor>(&a, 1), partners, mask), Error);
  HeadMetricsAccumulator ok(1, 3, 2);
  auto bad = partners;
  bad[1][3] = static_cast<int32_t>(T);
  CHECK_THROWS_WITH_AS(ok.add(std::span<const Tensor>(&a, 1), bad, mask),
                       doctest::Contains("outside"), Error);
  CHECK_THROWS_AS(HeadMetricsAccumulator(0, 1, 1), Error);
}

TEST_CASE("train: s_match finds the best one-to-one assignment where greedy fails") {
  // Greedy (best head for relation 0 first) takes head 0 for both and gets (0.9 + 0.1) / 2.
  HeadRelationMatrix m(1, 2, 2);
  m.at(0, 0, 0) = 0.9;
  m.at(0, 0, 1) = 0.8;
  m.at(0, 1, 0) = 0.85;
  m.at(0, 1, 1) = 0.1;
  const Specialization s = specialization(m);
  CHECK(s.s_match == doctest::Approx((0.85 + 0.8) / 2));
  CHECK(s.assignment[0] == HeadRef{0, 1});
  CHECK(s.assignment[1] == HeadRef{0, 0});
  CHECK(s.s_max == doctest::Approx((0.9 + 0.8) / 2));
  CHECK(s.n_claimed == 2);
}

TEST_CASE("train: s_match with fewer heads than relations leaves relations at 0") {
  HeadRelationMatrix m(1, 1, 3);
  m.at(0, 0, 0) = 0.26;
  m.at(0, 0, 1) = 0.65;
  m.at(0, 0, 2) = 0.09;
  const Specialization s = specialization(m);
  CHECK(s.s_match == doctest::Approx(0.65 / 3));
  CHECK(s.s_max == doctest::Approx((0.26 + 0.65 + 0.09) / 3));
  CHECK(s.n_claimed == 1);
  CHECK_FALSE(s.assignment[0].valid());
  CHECK(s.assignment[1] == HeadRef{0, 0});
  CHECK_FALSE(s.assignment[2].valid());
  // A single head below the claim threshold claims nothing.
  m.at(0, 0, 1) = 0.5;
  CHECK(specialization(m).n_claimed == 0);
}

TEST_CASE("train: s_match equals brute force on random mass matrices") {
  Rng rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const int L = 1 + static_cast<int>(rng.below(2));
    const int H = 1 + static_cast<int>(rng.below(4));
    const int R = 1 + static_cast<int>(rng.below(4));
    HeadRelationMatrix m(L, H, R);
    for (double& v : m.values) v = rng.uniform();
    const Specialization s = specialization(m);
    CHECK(s.s_match == doctest::Approx(brute_force_s_match(m)));
    // The returned assignment is consistent with the score and uses distinct heads.
    double total = 0.0;
    for (int r = 0; r < R; ++r) {
      const HeadRef a = s.assignment[r];
      if (!a.valid()) continue;
      total += m.at(a.layer, a.head, r);
      for (int q = 0; q < r; ++q) CHECK_FALSE(s.assignment[q] == a);
    }
    CHECK(total / R == doctest::Approx(s.s_match));
    CHECK(s.s_match <= s.s_max + 1e-12);
  }
}

TEST_CASE("train: relation groups, gates and group-ablation drops") {
  HeadRelationMatrix m(1, 4, 3);
  const double rows[4][3] = {
      {0.99, 0.0, 0.0}, {0.1, 0.7, 0.2}, {0.05, 0.6, 0.3}, {0.2, 0.25, 0.28}};
  for (int h = 0; h < 4; ++h)
    for (int r = 0; r < 3; ++r) m.at(0, h, r) = rows[h][r];
  const auto groups = relation_groups(m, 0.3);
  REQUIRE(groups.size() == 3);
  CHECK(groups[0] == std::vector<HeadRef>{{0, 0}});
  CHECK(groups[1] == std::vector<HeadRef>{{0, 1}, {0, 2}});
  CHECK(groups[2].empty());  // head 3's largest mass 0.28 is below 0.3

  const auto gates = gates_without(1, 4, groups[1]);
  CHECK(gates[0] == std::vector<float>{1, 0, 0, 1});
  CHECK(gates_keep_only(2, 3, HeadRef{1, 2}) ==
        std::vector<std::vector<float>>{{1, 1, 1}, {0, 0, 1}});
  CHECK_THROWS_AS(gates_keep_only(1, 3, HeadRef{0, 3}), Error);

  LabelAccuracy base{0.9, {0.95, 0.9, 0.97}, 10};
  std::vector<LabelAccuracy> ablated = {{0.3, {0.25, 0.9, 0.96}, 10}, {0.5, {0.95, 0.5, 0.9}, 10}};
  const auto drops = group_ablation_drops(base, ablated);
  CHECK(drops[0][0] == doctest::Approx(0.70));
  CHECK(drops[0][1] == doctest::Approx(0.0));
  CHECK(drops[1][1] == doctest::Approx(0.40));
  CHECK(drops[1][2] == doctest::Approx(0.07));
}

TEST_CASE("train: component accuracy scores each relation by the task's relation_correct") {
  // The dependency task with K = 4, R = 3: label = c0 * 16 + c1 * 4 + c2, relation r right when
  // digit r is.
  // The one accuracy counter (train/eval/evaluation.h) on logits whose argmax is `pred`.
  const DependencyTask task({4, {"PREV", "HEAD", "SEM"}, "factored"});
  const std::vector<int32_t> gold = {kIgnoreIndex, 2 * 16 + 3 * 4 + 1, 0, 63, 5};
  const std::vector<int32_t> pred = {7, 2 * 16 + 3 * 4 + 1, 1, 3 * 16 + 3 * 4 + 0, 5};
  Tensor logits = Tensor::zeros({1, 5, 64});
  for (size_t i = 0; i < pred.size(); ++i) logits.data()[i * 64 + pred[i]] = 1.0f;
  EvalCounts counts;
  count_predictions(logits, gold, &task, counts);
  const LabelAccuracy a = label_accuracy(counts);
  CHECK(a.count == 4);  // BOS (kIgnoreIndex) is not counted
  CHECK(a.accuracy == 0.5);
  CHECK(a.component[0] == 1.0);  // all first digits right
  CHECK(a.component[1] == 1.0);  // all second digits right
  CHECK(a.component[2] == 0.5);  // 0 vs 1 and 3 vs 0 wrong
  CHECK_THROWS_WITH_AS(
      count_predictions(logits, std::span<const int32_t>(gold).first(2), &task, counts),
      "evaluation: 2 labels for 5 rows of logits", Error);
  // Counts add up token-weighted: a second batch of one right token.
  EvalCounts second;
  Tensor one = Tensor::zeros({1, 1, 64});
  one.data()[5] = 1.0f;
  count_predictions(one, std::vector<int32_t>{5}, &task, second);
  counts.add(second);
  CHECK(counts.tokens == 5);
  CHECK(counts.accuracy() == 3.0 / 5.0);
  // Without a task no relation is scored.
  EvalCounts plain_counts;
  count_predictions(logits, gold, nullptr, plain_counts);
  CHECK(plain_counts.relation_correct.empty());
  CHECK(plain_counts.correct == 2);

  // A task that does not override relation_correct scores the whole label for every relation.
  struct WholeLabel : Task {
    std::string name() const override { return "whole"; }
    int64_t seq_len() const override { return 1; }
    int64_t num_classes() const override { return 64; }
    const std::vector<FeatureSpec>& features() const override { return features_; }
    const std::vector<std::string>& relations() const override { return relations_; }
    void generate_sentences(uint64_t, int64_t, int64_t, int64_t, Batch&) const override {}
    std::vector<FeatureSpec> features_{{"token", 64}};
    std::vector<std::string> relations_{"A", "B", "C"};
  };
  const WholeLabel whole;
  EvalCounts plain;
  count_predictions(logits, gold, &whole, plain);
  for (double c : label_accuracy(plain).component) CHECK(c == 0.5);
}
