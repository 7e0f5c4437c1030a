// A query without a partner for a relation (kNoPartner, e.g. a conllu word with another DEPREL
// for a label relation): the head metrics, the chance baselines and the path masses score that
// relation over the queries that have a partner, never over attention to BOS.

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "train/analysis/baselines.h"
#include "train/analysis/composition.h"
#include "train/analysis/head_metrics.h"

using namespace headlab;

namespace {

// One sequence of T = 3 (BOS and two words), one head: row 1 = {0.2, 0.1, 0.7}, row 2 =
// {0.5, 0.3, 0.2}.
Tensor attention_of_one_head() {
  Tensor a = Tensor::zeros({1, 1, 3, 3});
  const float rows[3][3] = {{1, 0, 0}, {0.2f, 0.1f, 0.7f}, {0.5f, 0.3f, 0.2f}};
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) a.data()[i * 3 + j] = rows[i][j];
  return a;
}

const std::vector<uint8_t> kCounted = {0, 1, 1};
// Relation 0 has partners for both words (0 and 1); relation 1 only for word 1 (key 2).
const std::vector<std::vector<int32_t>> kPartners = {{kNoPartner, 0, 1},
                                                     {kNoPartner, 2, kNoPartner}};

}  // namespace

TEST_CASE("train: head metrics score a relation over the queries that have a partner for it") {
  const std::vector<Tensor> attention = {attention_of_one_head()};
  HeadMetricsAccumulator acc(1, 1, 2);
  acc.add(attention, kPartners, kCounted);
  const HeadMetrics m = acc.finish();
  CHECK(m.queries == 2);
  CHECK(m.relation_queries == std::vector<int64_t>{2, 1});
  CHECK(m.mass.at(0, 0, 0) == doctest::Approx((0.2 + 0.3) / 2));
  // Over word 1 alone: attention to BOS on word 2 (0.5) would have made it (0.7 + 0.5) / 2.
  CHECK(m.mass.at(0, 0, 1) == doctest::Approx(0.7));
  CHECK(m.argmax_accuracy.at(0, 0, 0) == doctest::Approx(0.0));
  CHECK(m.argmax_accuracy.at(0, 0, 1) == doctest::Approx(1.0));
  // Neither query has two real partners: word 1's relation 0 is BOS, word 2 has none for 1.
  CHECK(m.distinct_queries == 0);
  // Confidence and entropy are the head's own, over every counted query.
  CHECK(m.head_confidence(0, 0) == doctest::Approx((0.7 + 0.5) / 2));
}

TEST_CASE("train: a partner below kNoPartner is one error naming the query") {
  const std::vector<Tensor> attention = {attention_of_one_head()};
  HeadMetricsAccumulator acc(1, 1, 2);
  const std::vector<std::vector<int32_t>> bad = {{kNoPartner, 0, 1}, {kNoPartner, 2, -2}};
  std::string message;
  try {
    acc.add(attention, bad, kCounted);
  } catch (const Error& e) {
    message = e.what();
  }
  CHECK(message ==
        "head_metrics: partner -2 of relation 1 at batch 0 position 2 is outside [0, 3) and not "
        "-1 (no partner)");
  ChanceBaselineAccumulator chance(2);
  CHECK_THROWS_WITH_AS(chance.add(1, 3, bad, kCounted), doctest::Contains("and not -1"), Error);
}

TEST_CASE("train: chance baselines share the per-relation denominator") {
  ChanceBaselineAccumulator chance(2);
  chance.add(1, 3, kPartners, kCounted);
  const ChanceBaselines c = chance.finish();
  CHECK(c.relation_queries == std::vector<int64_t>{2, 1});
  CHECK(c.mass_uniform[1] == doctest::Approx(1.0 / 3));  // one query, three keys
  CHECK(c.argmax_offset[1] == doctest::Approx(1.0));     // word 1's partner is one to the right
  CHECK(c.argmax_offset_offset[1] == 1);
  CHECK(c.argmax_offset[0] == doctest::Approx(1.0));  // both words' partner is the key before
  CHECK(c.argmax_offset_offset[0] == -1);
}

TEST_CASE("train: a query without a partner leaves the path masses as if it were not counted") {
  // Two layers of one head each; layer 1's query 2 attends elsewhere than query 1.
  const std::vector<Tensor> attention = {attention_of_one_head(), attention_of_one_head()};
  PathMassAccumulator with_none(2, 1, 1), without(2, 1, 1);
  with_none.add(attention, std::vector<std::vector<int32_t>>{{kNoPartner, 2, kNoPartner}},
                kCounted);
  without.add(attention, std::vector<std::vector<int32_t>>{{kNoPartner, 2, kNoPartner}},
              std::vector<uint8_t>{0, 1, 0});
  const PathMass a = with_none.finish(), b = without.finish();
  CHECK(a.at({1, 0}, {0, 0}, 0) == doctest::Approx(b.at({1, 0}, {0, 0}, 0)));
  CHECK(a.baseline({0, 0}, 0) == doctest::Approx(b.baseline({0, 0}, 0)));
  // P = sum_j Y[1, j] X[j, 2] = 0.2 * 0 + 0.1 * 0.7 + 0.7 * 0.2.
  CHECK(a.at({1, 0}, {0, 0}, 0) == doctest::Approx(0.1 * 0.7 + 0.7 * 0.2));
}
