// Activation patching's bookkeeping (train/analysis/patching.h): the logit difference over the
// measured tokens of hand-made logits, and the fraction restored, summed over batches.

#include <doctest/doctest.h>

#include <vector>

#include "core/error.h"
#include "train/analysis/patching.h"
#include "train/tasks/task.h"

using namespace headlab;

namespace {

// Logits [1, T, C] whose token i gives `clean_logit` to class clean[i] and `corrupted_logit` to
// class corrupted[i], 0 elsewhere.
Tensor logits_for(const std::vector<int32_t>& clean, const std::vector<int32_t>& corrupted,
                  int64_t classes, float clean_logit, float corrupted_logit) {
  const auto T = static_cast<int64_t>(clean.size());
  Tensor x = Tensor::zeros({1, T, classes});
  for (int64_t i = 0; i < T; ++i) {
    if (clean[i] < 0) continue;
    x[i * classes + clean[i]] = clean_logit;
    x[i * classes + corrupted[i]] = corrupted_logit;
  }
  return x;
}

LogitDifference ld(double sum, int64_t tokens) {
  return {sum, tokens};
}

}  // namespace

TEST_CASE("train: patching logit difference sums the measured tokens only") {
  const std::vector<int32_t> clean = {kIgnoreIndex, 0, 1, 2, 3};
  const std::vector<int32_t> corrupted = {kIgnoreIndex, 1, 1, 0, 2};
  const std::vector<uint8_t> measured = {0, 1, 0, 1, 1};
  Tensor x = Tensor::zeros({1, 5, 4});
  auto at = [&](int64_t t, int64_t c) -> float& { return x[t * 4 + c]; };
  at(0, 0) = 100.0f;                   // BOS, not measured: its logits never count
  at(1, 0) = 3.0f, at(1, 1) = 1.0f;    // +2
  at(2, 1) = 50.0f;                    // not measured
  at(3, 2) = -1.0f, at(3, 0) = 0.5f;   // -1.5
  at(4, 3) = 0.25f, at(4, 2) = 0.25f;  // 0
  const LogitDifference d = logit_difference(x, clean, corrupted, measured);
  CHECK(d.tokens == 3);
  CHECK(d.sum == doctest::Approx(0.5));
  CHECK(d.mean() == doctest::Approx(0.5 / 3));
  // [B * T, C] reads the same.
  CHECK(logit_difference(x.view({5, 4}), clean, corrupted, measured).sum == doctest::Approx(0.5));
  // No measured token: sum 0, mean 0.
  const std::vector<uint8_t> none(5, 0);
  const LogitDifference empty = logit_difference(x, clean, corrupted, none);
  CHECK(empty.tokens == 0);
  CHECK(empty.sum == 0.0);
  CHECK(empty.mean() == 0.0);
}

TEST_CASE("train: patching logit difference names a size mismatch or a bad measured label") {
  const Tensor x = Tensor::zeros({2, 3, 4});
  const std::vector<int32_t> six = {0, 1, 2, 3, 0, 1}, five = {0, 1, 2, 3, 0};
  const std::vector<uint8_t> all(6, 1);
  CHECK_THROWS_WITH_AS(logit_difference(x, five, six, all),
                       doctest::Contains("5 clean labels, 6 corrupted labels and 6 measured flags "
                                         "for 6 rows of logits [2, 3, 4]"),
                       Error);
  CHECK_THROWS_WITH_AS(logit_difference(x, six, five, all), doctest::Contains("6 clean labels, 5"),
                       Error);
  CHECK_THROWS_WITH_AS(logit_difference(x, six, six, std::vector<uint8_t>(7, 1)),
                       doctest::Contains("7 measured flags"), Error);
  const std::vector<int32_t> bos = {kIgnoreIndex, 1, 2, 3, 0, 1};
  CHECK_THROWS_WITH_AS(logit_difference(x, bos, six, all),
                       doctest::Contains("measured token 0 has clean label -100"), Error);
  const std::vector<int32_t> high = {0, 1, 2, 3, 4, 1};
  CHECK_THROWS_WITH_AS(logit_difference(x, six, high, all),
                       doctest::Contains("corrupted label 4, expected both in [0, 4)"), Error);
  // An unmeasured BOS is fine.
  std::vector<uint8_t> no_bos = all;
  no_bos[0] = 0;
  CHECK(logit_difference(x, bos, six, no_bos).tokens == 5);
}

TEST_CASE("train: patching restored is 1 at the clean run, 0 at the corrupted run, 0.5 halfway") {
  const std::vector<int32_t> clean = {kIgnoreIndex, 2, 3, 1};
  const std::vector<int32_t> corrupted = {kIgnoreIndex, 0, 1, 2};
  const std::vector<uint8_t> measured = {0, 1, 1, 1};
  // Clean run: LD = 4 - 1 = 3 per token; corrupted: 1 - 4 = -3; halfway: 2.5 - 2.5 = 0.
  const LogitDifference c =
      logit_difference(logits_for(clean, corrupted, 4, 4, 1), clean, corrupted, measured);
  const LogitDifference k =
      logit_difference(logits_for(clean, corrupted, 4, 1, 4), clean, corrupted, measured);
  const LogitDifference half =
      logit_difference(logits_for(clean, corrupted, 4, 2.5f, 2.5f), clean, corrupted, measured);
  const LogitDifference over =
      logit_difference(logits_for(clean, corrupted, 4, 7, 1), clean, corrupted, measured);
  CHECK(c.mean() == doctest::Approx(3));
  CHECK(k.mean() == doctest::Approx(-3));
  PatchingAccumulator acc(2, 4);
  CHECK(acc.relations() == 2);
  CHECK(acc.sites() == 4);
  acc.add(0, 0, c, k, c);     // the patch brings the clean run back
  acc.add(0, 1, c, k, k);     // the patch changes nothing
  acc.add(0, 2, c, k, half);  // halfway
  acc.add(1, 0, c, k, over);  // overshoots: LD 6 against the clean 3
  REQUIRE(acc.restored(0, 0).has_value());
  CHECK(*acc.restored(0, 0) == doctest::Approx(1.0));
  CHECK(*acc.restored(0, 1) == doctest::Approx(0.0));
  CHECK(*acc.restored(0, 2) == doctest::Approx(0.5));
  CHECK(*acc.restored(1, 0) == doctest::Approx(1.5));  // not clamped
  CHECK_FALSE(acc.restored(0, 3).has_value());         // nothing added
  CHECK(acc.totals(0, 2).tokens == 3);
  CHECK(acc.totals(0, 2).clean == doctest::Approx(9));
  CHECK(acc.totals(0, 2).corrupted == doctest::Approx(-9));
  CHECK(acc.totals(0, 2).patched == doctest::Approx(0));
}

TEST_CASE("train: patching restored is undefined when the corruption does not move the logits") {
  PatchingAccumulator acc(1, 2);
  acc.add(0, 0, ld(6, 3), ld(6, 3), ld(1, 3));  // clean == corrupted
  CHECK_FALSE(acc.restored(0, 0).has_value());
  acc.add(0, 1, ld(3e-7, 1), ld(0, 1), ld(1e-7, 1));  // a gap below kDefaultMinGap
  CHECK_FALSE(acc.restored(0, 1).has_value());
  PatchingAccumulator fine(1, 1, 1e-9);  // a smaller min_gap defines it
  fine.add(0, 0, ld(3e-7, 1), ld(0, 1), ld(1.5e-7, 1));
  REQUIRE(fine.restored(0, 0).has_value());
  CHECK(*fine.restored(0, 0) == doctest::Approx(0.5));
  // A negative gap (the corruption raised the clean label) is defined: the ratio is the same.
  PatchingAccumulator neg(1, 1);
  neg.add(0, 0, ld(-2, 2), ld(2, 2), ld(0, 2));
  CHECK(*neg.restored(0, 0) == doctest::Approx(0.5));
}

TEST_CASE("train: patching sums over batches weighted by their measured tokens") {
  PatchingAccumulator acc(1, 1);
  // Batch 1: 1 token, clean LD 4, corrupted 0, patched 4 (fully restored).
  // Batch 2: 3 tokens, clean LD 4 each, corrupted 0, patched 0 (nothing restored).
  acc.add(0, 0, ld(4, 1), ld(0, 1), ld(4, 1));
  acc.add(0, 0, ld(12, 3), ld(0, 3), ld(0, 3));
  // Means over the 4 tokens: clean 4, corrupted 0, patched 1: restored 0.25, not the batches'
  // mean 0.5.
  CHECK(acc.totals(0, 0).tokens == 4);
  CHECK(*acc.restored(0, 0) == doctest::Approx(0.25));
  // A batch with no measured token adds nothing.
  acc.add(0, 0, ld(0, 0), ld(0, 0), ld(0, 0));
  CHECK(*acc.restored(0, 0) == doctest::Approx(0.25));
}

TEST_CASE("train: patching accumulator names bad sizes, indices and token counts") {
  CHECK_THROWS_WITH_AS(PatchingAccumulator(0, 4),
                       doctest::Contains("0 relations and 4 sites, expected both >= 1"), Error);
  CHECK_THROWS_WITH_AS(PatchingAccumulator(3, 0), doctest::Contains("3 relations and 0 sites"),
                       Error);
  CHECK_THROWS_WITH_AS(PatchingAccumulator(1, 1, -1.0),
                       doctest::Contains("min_gap is -1 but expected >= 0"), Error);
  PatchingAccumulator acc(2, 3);
  CHECK_THROWS_WITH_AS(
      acc.add(2, 0, ld(1, 1), ld(0, 1), ld(0, 1)),
      doctest::Contains("add: relation 2, site 0 is outside 2 relations x 3 sites"), Error);
  CHECK_THROWS_WITH_AS(acc.add(0, 3, ld(1, 1), ld(0, 1), ld(0, 1)),
                       doctest::Contains("site 3 is outside"), Error);
  CHECK_THROWS_WITH_AS(acc.restored(-1, 0), doctest::Contains("restored: relation -1"), Error);
  CHECK_THROWS_WITH_AS(acc.totals(0, -1), doctest::Contains("totals: relation 0, site -1"), Error);
  CHECK_THROWS_WITH_AS(acc.add(0, 0, ld(1, 2), ld(0, 2), ld(0, 3)),
                       doctest::Contains("have 2, 2 and 3 measured tokens"), Error);
  CHECK(acc.totals(0, 0).tokens == 0);  // a refused batch adds nothing
}
