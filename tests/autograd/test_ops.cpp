// Op values and edge cases beyond gradcheck: masked rows, large logits, ignored targets, the
// fused cross-entropy against the same loss composed of primitives, dropout's mask, and the
// error messages of shape mistakes.

#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "autograd/tape.h"
#include "core/error.h"
#include "tests/autograd/backend_scope.h"

using namespace headlab;

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

Var param(const Shape& shape, Rng& rng, float scale = 1.0f, float shift = 0.0f) {
  Tensor t = Tensor::empty(shape);
  for (int64_t i = 0; i < t.numel(); ++i) t[i] = shift + scale * rng.normal();
  return Var(t, true);
}

bool all_finite(const Tensor& t) {
  for (int64_t i = 0; i < t.numel(); ++i)
    if (!std::isfinite(t[i])) return false;
  return true;
}

// Mean cross-entropy in double straight from the formula: -(1/n) sum (x_t - logsumexp(x)).
double reference_cross_entropy(const Tensor& logits, const std::vector<int32_t>& targets,
                               int32_t ignore) {
  const int64_t c = logits.shape().back();
  double total = 0.0;
  int count = 0;
  for (size_t r = 0; r < targets.size(); ++r) {
    if (targets[r] == ignore) continue;
    const float* x = logits.data() + r * c;
    double max = x[0];
    for (int64_t j = 1; j < c; ++j) max = std::max(max, double{x[j]});
    double s = 0.0;
    for (int64_t j = 0; j < c; ++j) s += std::exp(x[j] - max);
    total -= x[targets[r]] - (max + std::log(s));
    ++count;
  }
  return count == 0 ? 0.0 : total / count;
}

}  // namespace

TEST_CASE("autograd: softmax of a fully masked row is zero, with a zero gradient and no NaN") {
  for (Backend b : test::kAllBackends) {
    const std::string backend = backend_name(b);
    CAPTURE(backend);
    test::BackendScope scope(b);
    Rng rng(3);
    Var x = param({3, 4}, rng);
    Tensor mask = Tensor::zeros({3, 4});
    for (int j = 0; j < 4; ++j) mask[4 + j] = 1.0f;  // row 1 fully masked
    mask[0] = 1.0f;                                  // row 0 partly masked
    Var y = softmax(masked_fill(x, mask, kNegInf));
    CHECK(all_finite(y.value()));
    for (int j = 0; j < 4; ++j) CHECK(y.value()[4 + j] == 0.0f);
    CHECK(y.value()[0] == 0.0f);
    double row0 = 0.0;
    for (int j = 0; j < 4; ++j) row0 += y.value()[j];
    CHECK(row0 == doctest::Approx(1.0));
    Rng seed_rng(4);
    y.backward(param({3, 4}, seed_rng).value());
    REQUIRE(x.has_grad());
    CHECK(all_finite(x.grad()));
    for (int j = 0; j < 4; ++j) CHECK(x.grad()[4 + j] == 0.0f);
    CHECK(x.grad()[0] == 0.0f);
  }
}

TEST_CASE("autograd: cross_entropy stays finite and exact for large logits") {
  for (Backend b : test::kAllBackends) {
    const std::string backend = backend_name(b);
    CAPTURE(backend);
    test::BackendScope scope(b);
    // Spread of 2e4 (exp overflows fp32 without the max shift) and an offset of 1e4.
    Var x(Tensor::from({2, 3}, {1e4f, 0.0f, -1e4f, 1e4f + 1.0f, 1e4f, 1e4f - 2.0f}), true);
    const std::vector<int32_t> targets{1, 0};
    Var loss = cross_entropy(x, targets);
    CHECK(std::isfinite(loss.value()[0]));
    CHECK(loss.value()[0] == doctest::Approx(reference_cross_entropy(x.value(), targets, -100)));
    loss.backward();
    CHECK(all_finite(x.grad()));
    // Row 0: softmax is one-hot on class 0, target 1: gradient (1, -1, 0) / 2.
    CHECK(x.grad()[0] == doctest::Approx(0.5));
    CHECK(x.grad()[1] == doctest::Approx(-0.5));
    CHECK(x.grad()[2] == doctest::Approx(0.0));
    // Row 1: (softmax - onehot(0)) / 2; the row's gradient sums to 0.
    CHECK(std::abs(x.grad()[3] + x.grad()[4] + x.grad()[5]) < 1e-5f);
    CHECK(x.grad()[3] < 0.0f);
  }
}

TEST_CASE("autograd: cross_entropy skips ignore_index rows and averages over counted rows") {
  Rng rng(5);
  Var x = param({2, 3, 4}, rng);
  const std::vector<int32_t> targets{1, -1, 3, -1, -1, 0};
  Var loss = cross_entropy(x, targets, -1);
  CHECK(loss.value()[0] == doctest::Approx(reference_cross_entropy(x.value(), targets, -1)));
  loss.backward();
  for (int r : {1, 3, 4})
    for (int j = 0; j < 4; ++j) CHECK(x.grad()[r * 4 + j] == 0.0f);
  // Counted rows: (softmax - onehot) / 3, so the target entry is below 0 and above -1/3.
  CHECK(x.grad()[0 * 4 + 1] < 0.0f);
  CHECK(x.grad()[0 * 4 + 1] > -1.0f / 3.0f);

  Var none = param({2, 4}, rng);
  Var zero = cross_entropy(none, std::vector<int32_t>{-100, -100});
  CHECK(zero.value()[0] == 0.0f);
  zero.backward();
  for (int64_t i = 0; i < 8; ++i) CHECK(none.grad()[i] == 0.0f);
}

TEST_CASE("autograd: fused cross_entropy equals log_softmax + pick composed of primitives") {
  for (Backend b : test::kAllBackends) {
    const std::string backend = backend_name(b);
    CAPTURE(backend);
    test::BackendScope scope(b);
    Rng rng(6);
    Var x1 = param({3, 2, 5}, rng, 2.0f);
    Var x2(x1.value().clone(), true);
    const std::vector<int32_t> targets{4, -100, 0, 2, 2, -100};
    Var fused = cross_entropy(x1, targets);
    fused.backward();

    // -(1/n) sum(log_softmax(x) * onehot): the pick is a product with a constant one-hot.
    Tensor onehot = Tensor::zeros({3, 2, 5});
    int count = 0;
    for (int r = 0; r < 6; ++r)
      if (targets[r] != -100) {
        onehot[r * 5 + targets[r]] = 1.0f;
        ++count;
      }
    Var composed = scale(sum(mul(log_softmax(x2), Var(onehot))), -1.0f / count);
    composed.backward();
    CHECK(fused.value()[0] == doctest::Approx(composed.value()[0]).epsilon(1e-6));
    for (int64_t i = 0; i < x1.numel(); ++i)
      CHECK(x1.grad()[i] == doctest::Approx(x2.grad()[i]).epsilon(1e-5));
  }
}

TEST_CASE("autograd: dropout draws its mask from the rng and scales kept values") {
  Rng data(7);
  Var x = param({100, 100}, data, 1.0f, 3.0f);
  Rng a(42), b(42);
  Var y1 = dropout(x, 0.3f, a, true);
  Var y2 = dropout(x, 0.3f, b, true);
  CHECK(y1.value().to_vector() == y2.value().to_vector());  // same seed, same mask
  int64_t dropped = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (y1.value()[i] == 0.0f)
      ++dropped;
    else
      CHECK(y1.value()[i] == doctest::Approx(x.value()[i] / 0.7f));
  }
  CHECK(dropped > 2700);  // binomial(10^4, 0.3): mean 3000, sd 46
  CHECK(dropped < 3300);
  sum(y1).backward();
  for (int64_t i = 0; i < x.numel(); ++i)
    CHECK(x.grad()[i] == (y1.value()[i] == 0.0f ? 0.0f : 1.0f / 0.7f));
  Tape::current().clear();

  Rng c(42);
  Var eval = dropout(x, 0.3f, c, false);
  CHECK(eval.value().to_vector() == x.value().to_vector());
  CHECK_THROWS_WITH_AS(dropout(x, 1.0f, c, true), doctest::Contains("dropout: p is 1"), Error);
}

TEST_CASE("autograd: keyed dropout gives a sample the same mask wherever its row is computed") {
  Rng data(8);
  Var x = param({6, 4, 5}, data, 1.0f, 3.0f);  // 6 samples of [4, 5]
  SampleRng whole(99);
  whole.set_position(3, 10);  // samples 10..15 of step 3
  const Tensor all = dropout(x, 0.4f, whole, true).value();
  const Tensor second_site = dropout(x, 0.4f, whole, true).value();
  CHECK(all.to_vector() != second_site.to_vector());  // each call is a site of its own
  // Samples 12..15 alone, at their position: bit for bit the rows they had in the batch.
  SampleRng part(99);
  part.set_position(3, 12);
  const std::span<const float> last4(x.value().data() + 2 * 20, 4 * 20);
  const Tensor rows = dropout(Var(Tensor::from({4, 4, 5}, last4)), 0.4f, part, true).value();
  for (int64_t i = 0; i < 4 * 20; ++i) CHECK(rows[i] == all[2 * 20 + i]);
  // The mask of row r is the row generator's draws: dropped where uniform() < p.
  Rng row0 = whole.row(0, 0);
  for (int64_t i = 0; i < 20; ++i) CHECK((all[i] == 0.0f) == (row0.uniform() < 0.4f));
  Tape::current().clear();
}

TEST_CASE("autograd: embedding gathers rows and scatter-adds repeated ids") {
  Var w(Tensor::from({3, 2}, {1, 2, 3, 4, 5, 6}), true);
  const std::vector<int32_t> ids{2, 0, 2};
  Var y = embedding(w, ids, Shape{3});
  CHECK(y.shape() == Shape{3, 2});
  CHECK(y.value().to_vector() == std::vector<float>{5, 6, 1, 2, 5, 6});
  sum(y).backward();
  CHECK(w.grad().to_vector() == std::vector<float>{1, 1, 0, 0, 2, 2});
  CHECK_THROWS_WITH_AS(embedding(w, std::vector<int32_t>{0, 3}, Shape{2}),
                       doctest::Contains("embedding: id 3 at position 1 is outside [0, 3)"), Error);
}

TEST_CASE("autograd: masked_fill broadcasts a [B, 1, 1, S] mask over [B, h, T, S]") {
  Var x(Tensor::full({2, 2, 2, 3}, 1.0f), true);
  Tensor mask = Tensor::zeros({2, 1, 1, 3});
  mask[2] = 1.0f;  // batch 0, key 2
  mask[3] = 1.0f;  // batch 1, key 0
  Var y = masked_fill(x, mask, -5.0f);
  for (int64_t i = 0; i < 24; ++i) {
    const int64_t batch = i / 12, key = i % 3;
    const bool masked = (batch == 0 && key == 2) || (batch == 1 && key == 0);
    CHECK(y.value()[i] == (masked ? -5.0f : 1.0f));
  }
  CHECK_THROWS_WITH_AS(masked_fill(x, Tensor::zeros({2, 1, 2}), 0.0f),
                       doctest::Contains("masked_fill: mask shape [2, 1, 2]"), Error);
  Tape::current().clear();
}

TEST_CASE("autograd: head_gate with gate 0 silences a head and still gives dL/dgate") {
  Rng rng(8);
  Var x = param({2, 2, 3, 4}, rng);
  Var gate(Tensor::from({2}, {1.0f, 0.0f}), true);
  Var y = head_gate(x, gate);
  for (int64_t i = 0; i < 12; ++i) {
    CHECK(y.value()[i] == x.value()[i]);  // batch 0, head 0 kept
    CHECK(y.value()[12 + i] == 0.0f);     // batch 0, head 1 ablated
  }
  sum(y).backward();
  double head1 = 0.0;  // dL/dgate_1 = sum of head 1's inputs
  for (int b = 0; b < 2; ++b)
    for (int64_t i = 0; i < 12; ++i) head1 += x.value()[b * 24 + 12 + i];
  CHECK(gate.grad()[1] == doctest::Approx(head1).epsilon(1e-5));
  CHECK(x.grad()[12] == 0.0f);
}

TEST_CASE("autograd: reshape is a view and transpose, split and merge are inverse copies") {
  Rng rng(9);
  Var x = param({2, 3, 4}, rng);
  Var r = reshape(x, Shape{6, 4});
  CHECK(r.value().shares_storage(x.value()));
  Var t = transpose(transpose(x));
  CHECK_FALSE(t.value().shares_storage(x.value()));
  CHECK(t.value().to_vector() == x.value().to_vector());
  Var m = merge_heads(split_heads(x, 2));
  CHECK(m.value().to_vector() == x.value().to_vector());
  Var s = split_heads(x, 2);  // [2, 2, 3, 2]: s[b, k, t, e] = x[b, t, 2k + e]
  CHECK(s.value()[1 * 12 + 1 * 6 + 2 * 2 + 1] == x.value()[1 * 12 + 2 * 4 + 2 * 1 + 1]);
  Tape::current().clear();
}

TEST_CASE("autograd: shape mistakes name the op and both shapes") {
  Var a(Tensor::zeros({2, 3}), true);
  Var b(Tensor::zeros({3, 2}), true);
  CHECK_THROWS_WITH_AS(
      add(a, b),
      doctest::Contains("add: shapes [2, 3] and [3, 2] do not broadcast (dim -1: 3 vs 2"), Error);
  CHECK_THROWS_WITH_AS(mul(a, Var(Tensor::zeros({2}))),
                       doctest::Contains("mul: shapes [2, 3] and [2] do not broadcast"), Error);
  CHECK_THROWS_WITH_AS(matmul(a, a), doctest::Contains("matmul: inner dims differ: a [2, 3]"),
                       Error);
  CHECK_THROWS_WITH_AS(layer_norm(a, Var(Tensor::zeros({2})), Var()),
                       doctest::Contains("layer_norm: gain shape is [2] but expected [3]"), Error);
  CHECK_THROWS_WITH_AS(split_heads(Var(Tensor::zeros({1, 2, 6})), 4),
                       doctest::Contains("split_heads: heads = 4 does not divide"), Error);
  CHECK_THROWS_WITH_AS(
      cross_entropy(a, std::vector<int32_t>{0}),
      doctest::Contains("cross_entropy: 1 targets given for logits [2, 3] (2 rows)"), Error);
  CHECK_THROWS_WITH_AS(cross_entropy(a, std::vector<int32_t>{0, 3}),
                       doctest::Contains("cross_entropy: target 3 at row 1 is outside [0, 3)"),
                       Error);
  CHECK_THROWS_WITH_AS(head_gate(Var(Tensor::zeros({1, 2, 1, 1})), Var(Tensor::zeros({3}))),
                       doctest::Contains("head_gate: gate shape is [3] but expected [2]"), Error);
  CHECK_THROWS_WITH_AS(reshape(a, Shape{4, 2}),
                       doctest::Contains("reshape: cannot reshape [2, 3] to [4, 2]"), Error);
  CHECK_THROWS_WITH_AS(mean(Var(Tensor::zeros({0, 3}))),
                       doctest::Contains("mean: input of shape [0, 3]"), Error);
  CHECK_THROWS_WITH_AS(softmax(Var()), doctest::Contains("softmax: an input is undefined"), Error);
  // make_output skips undefined inputs (the absent optional ones), so each op checks its
  // required ones before reading them.
  for (auto* binary : {&matmul, &batched_matmul})
    CHECK_THROWS_WITH_AS(binary(Var(), a, false, false),
                         doctest::Contains("matmul: an input is undefined"), Error);
  CHECK_THROWS_WITH_AS(sum(Var()), doctest::Contains("sum: an input is undefined"), Error);
  CHECK_THROWS_WITH_AS(scale(Var(), 2.0f), doctest::Contains("scale: an input is undefined"),
                       Error);
  CHECK_THROWS_WITH_AS(layer_norm(Var(), a, Var()),
                       doctest::Contains("layer_norm: an input is undefined"), Error);
}
