// Chance baselines (train/analysis/baselines.h, composition.h) on hand-built partners and
// attention whose answers are known by construction: a uniform head scores exactly the uniform
// baseline, an offset head exactly the offset baseline, a uniform upper head exactly its path
// baseline (and is not claimed), while a real composing pair is claimed.

#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "core/error.h"
#include "tests/train/toy_partners.h"
#include "train/analysis/baselines.h"
#include "train/analysis/composition.h"
#include "train/analysis/head_metrics.h"

using namespace headlab;

namespace {

using namespace toy_partners;

EvalCounts batch_of(int64_t tokens, int64_t correct) {
  EvalCounts c;
  c.tokens = tokens;
  c.correct = correct;
  return c;
}

}  // namespace

TEST_CASE("train: the uniform-mass baseline is 1/|visible keys| per partner") {
  const auto partners = make_partners();
  const auto counted = non_bos();
  ChanceBaselineAccumulator acc(2);
  acc.add(B, T, partners, counted);
  const ChanceBaselines c = acc.finish();
  CHECK(c.queries == B * (T - 1));
  CHECK(c.mass_uniform[0] == doctest::Approx(1.0 / T));
  CHECK(c.mass_uniform[1] == doctest::Approx(1.0 / T));
  // Distinct partners: PREV is BOS (0) at i = 1, and FAR coincides with PREV nowhere else.
  CHECK(c.distinct_queries == B * (T - 2));
  CHECK(c.mass_distinct_uniform[0] == doctest::Approx(1.0 / T));

  // A uniform head's measured mass is its baseline: the two share their queries.
  Tensor a = Tensor::zeros({B, 1, T, T});
  for (int64_t k = 0; k < a.numel(); ++k) a.data()[k] = 1.0f / T;
  HeadMetricsAccumulator metrics(1, 1, 2);
  metrics.add(std::vector<Tensor>{a}, partners, counted);
  const HeadMetrics m = metrics.finish();
  CHECK(m.mass.at(0, 0, 0) == doctest::Approx(c.mass_uniform[0]));
  CHECK(m.mass_distinct.at(0, 0, 1) == doctest::Approx(c.mass_distinct_uniform[1]));

  // Key padding: sequence 1's last two keys are padding, so its queries see T - 2 keys, and a
  // partner on a padded key (PREV of i = 5, FAR of i = 2, 3) gets nothing.
  std::vector<uint8_t> padding(B * T, 0);
  padding[1 * T + 4] = padding[1 * T + 5] = 1;
  ChanceBaselineAccumulator padded(2);
  padded.add(B, T, partners, counted, padding);
  const ChanceBaselines p = padded.finish();
  // PREV partners of sequence 1: 0..4 -> 4 of 5 visible.
  CHECK(p.mass_uniform[0] ==
        doctest::Approx(((T - 1) * (1.0 / T) + 4 * (1.0 / (T - 2))) / (2 * (T - 1))));
  // FAR partners of sequence 1: 3, 4, 5, 1, 1 -> 3 of 5 visible.
  CHECK(p.mass_uniform[1] ==
        doctest::Approx(((T - 1) * (1.0 / T) + 3 * (1.0 / (T - 2))) / (2 * (T - 1))));

  CHECK_THROWS_AS(ChanceBaselineAccumulator(0), Error);
  CHECK_THROWS_AS(acc.add(B, T, partners, std::vector<uint8_t>(3, 1)), Error);
  CHECK_THROWS_AS(acc.add(B, T, partners, counted, std::vector<uint8_t>(3, 0)), Error);
  auto bad = partners;
  bad[0][1] = static_cast<int32_t>(T);
  CHECK_THROWS_AS(acc.add(B, T, bad, counted), Error);
}

TEST_CASE("train: the offset baseline is the best fixed-offset head's argmax accuracy") {
  const auto partners = make_partners();
  const auto counted = non_bos();
  ChanceBaselineAccumulator acc(2);
  acc.add(B, T, partners, counted);
  const ChanceBaselines c = acc.finish();
  // PREV is always d = -1.
  CHECK(c.argmax_offset[0] == doctest::Approx(1.0));
  CHECK(c.argmax_offset_offset[0] == -1);
  // FAR: i = 1, 2, 3 -> 3, 4, 5 (d = +2); i = 4 -> 1 (d = -3); i = 5 -> 1 (d = -4).
  CHECK(c.argmax_offset[1] == doctest::Approx(3.0 / 5));
  CHECK(c.argmax_offset_offset[1] == 2);

  // A head that always looks d = +2 to the right (BOS where i + 2 is outside [0, T): a miss)
  // scores the offset baseline as its argmax accuracy on FAR.
  Tensor a = Tensor::zeros({B, 1, T, T});
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < T; ++i) a.data()[(b * T + i) * T + (i + 2 < T ? i + 2 : 0)] = 1.0f;
  HeadMetricsAccumulator metrics(1, 1, 2);
  metrics.add(std::vector<Tensor>{a}, partners, counted);
  CHECK(metrics.finish().argmax_accuracy.at(0, 0, 1) == doctest::Approx(c.argmax_offset[1]));

  // Longer sequences widen the offset table without losing what was counted.
  const int64_t T2 = 9;
  std::vector<std::vector<int32_t>> far(1, std::vector<int32_t>(T2, -1));
  std::vector<uint8_t> all(T2, 1);
  all[0] = 0;
  for (int64_t i = 1; i < T2; ++i) far[0][i] = static_cast<int32_t>(i - 1);
  ChanceBaselineAccumulator grow(1);
  grow.add(B, T, std::vector<std::vector<int32_t>>{partners[0]}, counted);
  grow.add(1, T2, far, all);
  const ChanceBaselines g = grow.finish();
  CHECK(g.argmax_offset[0] == doctest::Approx(1.0));
  CHECK(g.argmax_offset_offset[0] == -1);
}

TEST_CASE("train: accuracy spread across batches and the ablation-drop baseline") {
  const std::vector<EvalCounts> batches = {batch_of(10, 5), batch_of(10, 7), batch_of(10, 9)};
  const AccuracySpread s = accuracy_spread(batches);
  CHECK(s.defined);
  CHECK(s.batches == 3);
  CHECK(s.mean == doctest::Approx(0.7));
  CHECK(s.sd == doctest::Approx(0.2));
  CHECK(s.standard_error == doctest::Approx(0.2 / std::sqrt(3.0)));
  CHECK(s.drop_baseline == doctest::Approx(2 * 0.2 / std::sqrt(3.0)));
  const AccuracySpread one = accuracy_spread(std::vector<EvalCounts>{batch_of(10, 5)});
  CHECK_FALSE(one.defined);
  CHECK(one.batches == 1);
  CHECK(one.drop_baseline == 0.0);
}

TEST_CASE("train: best head per relation against the offset baseline") {
  HeadRelationMatrix acc(2, 2, 2);
  acc.at(0, 1, 0) = 0.9;
  acc.at(1, 0, 0) = 0.9;  // a tie: the first head in layer-major order wins
  acc.at(1, 1, 1) = 0.4;
  ChanceBaselines c;
  c.argmax_offset = {1.0, 0.25};
  c.argmax_offset_offset = {-1, 3};
  const std::vector<BestHead> best = best_heads(acc, c);
  REQUIRE(best.size() == 2);
  CHECK(best[0].head == HeadRef{0, 1});
  CHECK(best[0].margin == doctest::Approx(-0.1));  // a fixed offset beats every head
  CHECK(best[0].offset == -1);
  CHECK(best[1].head == HeadRef{1, 1});
  CHECK(best[1].argmax_accuracy == doctest::Approx(0.4));
  CHECK(best[1].margin == doctest::Approx(0.15));
  c.argmax_offset.pop_back();
  CHECK_THROWS_AS(best_heads(acc, c), Error);
}

TEST_CASE("train: a uniform upper head gets its path baseline and is not claimed") {
  // Two layers of two heads, one sentence of T = 4; relation 0's partner is two to the left
  // (clamped at BOS). Layer 0: X0 looks at its left neighbour, X1 at itself. Layer 1: Y0 looks
  // at its left neighbour (with X0: two to the left, the partner), Y1 is uniform.
  constexpr int64_t N = 4;
  const auto left = [](int64_t i) { return i == 0 ? 0 : i - 1; };
  Tensor a0 = Tensor::zeros({1, 2, N, N}), a1 = Tensor::zeros({1, 2, N, N});
  for (int64_t i = 0; i < N; ++i) {
    a0.data()[(0 * N + i) * N + left(i)] = 1.0f;
    a0.data()[(1 * N + i) * N + i] = 1.0f;
    a1.data()[(0 * N + i) * N + left(i)] = 1.0f;
    for (int64_t j = 0; j < N; ++j) a1.data()[(1 * N + i) * N + j] = 1.0f / N;
  }
  const std::vector<std::vector<int32_t>> partners = {{-1, 0, 0, 1}};
  const std::vector<uint8_t> counted = {0, 1, 1, 1};
  const std::vector<Tensor> attention = {a0, a1};
  PathMassAccumulator acc(2, 2, 1);
  acc.add(attention, partners, counted);
  const PathMass p = acc.finish();
  // X0's columns: key 0 gets keys 0 and 1, key 1 gets key 2; partners 0, 0, 1.
  const double x0_baseline = (2.0 / N + 2.0 / N + 1.0 / N) / 3;
  CHECK(p.baseline({0, 0}, 0) == doctest::Approx(x0_baseline));
  CHECK(p.baseline({0, 1}, 0) == doctest::Approx(1.0 / N));  // the identity: 1/T
  CHECK(p.at({1, 1}, {0, 0}, 0) == doctest::Approx(x0_baseline));
  CHECK(p.at({1, 1}, {0, 1}, 0) == doctest::Approx(1.0 / N));
  CHECK(p.at({1, 0}, {0, 0}, 0) == doctest::Approx(1.0));

  const HeadRelationMatrix base(2, 2, 1);
  const std::vector<HeadRelationMatrix> ablated(2, base);
  const std::vector<HeadComposition> c = compositions(base, p, ablated);
  REQUIRE(c.size() == 2);
  // The composing pair: 1.0 against a baseline of 0.42.
  CHECK(c[0].composes_with == HeadRef{0, 0});
  CHECK(c[0].path_mass_baseline == doctest::Approx(x0_baseline));
  CHECK(c[0].claimed);
  // The uniform head's strongest path is its baseline exactly: chance, not composition.
  CHECK(c[1].composes_with == HeadRef{0, 0});
  CHECK(c[1].path_mass == doctest::Approx(c[1].path_mass_baseline));
  CHECK_FALSE(c[1].claimed);
  REQUIRE(c[1].sources.size() == 2);
  CHECK(c[1].sources[1].path_mass_baseline == doctest::Approx(1.0 / N));

  // Padding key 3: a uniform head sees keys 0..2, X0's visible rows put 2 on key 0 and 1 on 1.
  PathMassAccumulator padded(2, 2, 1);
  padded.add(attention, partners, counted, std::vector<uint8_t>{0, 0, 0, 1});
  CHECK(padded.finish().baseline({0, 0}, 0) == doctest::Approx((2.0 + 2.0 + 1.0) / 3 / 3));
  CHECK_THROWS_AS(padded.add(attention, partners, counted, std::vector<uint8_t>{0, 1}), Error);
}

TEST_CASE("train: a path must also beat a uniform lower head to be claimed") {
  // The lower-head null: X replaced by a head attending uniformly over the visible keys, so Y's
  // path reaches the partner with mean_i sum_j A_Y[i, j] [p visible] / |visible|. T = 4 without
  // padding: 1/4 for any Y whose rows sum to 1.
  constexpr int64_t N = 4;
  Tensor a0 = Tensor::zeros({1, 1, N, N}), a1 = Tensor::zeros({1, 1, N, N});
  for (int64_t i = 0; i < N; ++i) {
    a0.data()[i * N + (i == 0 ? 0 : i - 1)] = 1.0f;  // X: left neighbour
    a1.data()[i * N + 0] = 0.5f;                     // Y: half on BOS, half on key 3
    a1.data()[i * N + 3] = 0.5f;
  }
  const std::vector<std::vector<int32_t>> partners = {{-1, 0, 2, 2}};
  const std::vector<uint8_t> counted = {0, 1, 1, 1};
  const std::vector<Tensor> attention = {a0, a1};
  PathMassAccumulator acc(2, 1, 1);
  acc.add(attention, partners, counted);
  const PathMass p = acc.finish();
  CHECK(p.lower_baseline({1, 0}, 0) == doctest::Approx(1.0 / N));
  // Padding key 1: three keys visible, Y's rows all on them; partner 0 and 2 visible.
  PathMassAccumulator padded(2, 1, 1);
  padded.add(attention, partners, counted, std::vector<uint8_t>{0, 1, 0, 0});
  CHECK(padded.finish().lower_baseline({1, 0}, 0) == doctest::Approx(1.0 / 3));
  // By hand: P = mean over queries 1..3 of 0.5 A_X[0, p] + 0.5 A_X[3, p]: key 0 -> 0, key 3 ->
  // 2, partners 0, 2, 2: (0.5 + 0.5 + 0.5) / 3 = 0.5; uniform Y: column sums of X / 4 at the
  // partner (key 0: 2, key 2: 1): (2 + 1 + 1) / 4 / 3 = 1/3.
  CHECK(p.at({1, 0}, {0, 0}, 0) == doctest::Approx(0.5));
  CHECK(p.baseline({0, 0}, 0) == doctest::Approx(1.0 / 3));

  // The claim takes the larger null: a path of 0.4 against Y-uniform 0.1 is claimed with a
  // lower-head null of 0.25 (0.4 > 0.35) and not with 0.35 (0.4 < 0.45).
  PathMass hand{2, 1, 1, std::vector<double>(4, 0.0), {0.1, 0.0}, {0.0, 0.25}};
  hand.values[(1 * 2 + 0) * 1] = 0.4;  // P[Y = (1, 0), X = (0, 0)]
  const HeadRelationMatrix base(2, 1, 1);
  const std::vector<HeadRelationMatrix> ablated(1, base);
  std::vector<HeadComposition> c = compositions(base, hand, ablated);
  REQUIRE(c.size() == 1);
  CHECK(c[0].path_mass == doctest::Approx(0.4));
  CHECK(c[0].path_mass_baseline == doctest::Approx(0.1));
  CHECK(c[0].path_mass_lower_baseline == doctest::Approx(0.25));
  CHECK(c[0].claimed);
  hand.uniform_lower[1] = 0.35;
  c = compositions(base, hand, ablated);
  CHECK_FALSE(c[0].claimed);
}
