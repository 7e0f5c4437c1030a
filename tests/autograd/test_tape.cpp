#include <doctest/doctest.h>

#include <vector>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "autograd/tape.h"
#include "core/error.h"
#include "core/rng.h"

using namespace headlab;

TEST_CASE("autograd: matmul backward with a seed matches the closed form") {
  // y = x w, dy = ones -> dx = ones w^T, dw = x^T ones.
  Var x(Tensor::from({2, 3}, {1, 2, 3, 4, 5, 6}), true);
  Var w(Tensor::from({3, 2}, {1, -1, 2, 0, 0.5, 3}), true);
  Var y = matmul(x, w);
  CHECK(y.shape() == Shape{2, 2});
  CHECK(y.value()[0] == doctest::Approx(1 + 4 + 1.5));
  y.backward(Tensor::full({2, 2}, 1.0f));
  CHECK(x.grad()[0] == doctest::Approx(0.0));  // w row 0 sums to 0
  CHECK(x.grad()[1] == doctest::Approx(2.0));
  CHECK(x.grad()[2] == doctest::Approx(3.5));
  CHECK(w.grad()[0] == doctest::Approx(5.0));  // x column 0 sums to 5
  CHECK(w.grad()[5] == doctest::Approx(9.0));
}

TEST_CASE("autograd: backward twice over a cleared tape is an error") {
  Var x(Tensor::from({1, 1}, {2}), true);
  Var y = matmul(x, x);
  y.backward();
  CHECK(x.grad()[0] == doctest::Approx(4.0));  // d(x^2)/dx: both uses accumulate
  CHECK_THROWS_WITH_AS(y.backward(), doctest::Contains("already cleared"), Error);
}

TEST_CASE("autograd: nothing is recorded under NoGradGuard") {
  Var x(Tensor::from({1, 1}, {2}), true);
  Tape& tape = Tape::current();
  const size_t before = tape.size();
  {
    NoGradGuard guard;
    Var y = matmul(x, x);
    CHECK_FALSE(y.requires_grad());
  }
  CHECK(tape.size() == before);
}

TEST_CASE("autograd: y = x*x + x accumulates both uses of x") {
  Var x(Tensor::from({3}, {-1.5f, 0.5f, 2.0f}), true);
  Var y = add(mul(x, x), x);
  sum(y).backward();
  for (int i = 0; i < 3; ++i) CHECK(x.grad()[i] == doctest::Approx(2.0 * x.value()[i] + 1.0));
}

TEST_CASE("autograd: a shared input used by two ops gets the sum of both gradients") {
  Var x(Tensor::from({4}, {-2.0f, -0.5f, 0.5f, 3.0f}), true);
  Var a = scale(x, 3.0f);
  Var b = relu(x);
  sum(add(a, b)).backward();  // d/dx = 3 + [x > 0]
  for (int i = 0; i < 4; ++i) CHECK(x.grad()[i] == doctest::Approx(x.value()[i] > 0 ? 4.0 : 3.0));
}

TEST_CASE("autograd: a parameter used in two layers gets the sum of its two uses") {
  // h = (x w) w: the gradient of w equals that of two separate copies w1, w2 added.
  Tensor x0 = Tensor::from({2, 3}, {0.5f, -1.0f, 2.0f, 1.5f, 0.25f, -0.75f});
  Tensor w0 = Tensor::from({3, 3}, {0.2f, -0.1f, 0.4f, 1.0f, 0.3f, -0.6f, 0.05f, 0.7f, -0.2f});
  Var x(x0), w(w0.clone(), true);
  sum(gelu(matmul(matmul(x, w), w))).backward();
  Var w1(w0.clone(), true), w2(w0.clone(), true);
  sum(gelu(matmul(matmul(x, w1), w2))).backward();
  for (int i = 0; i < 9; ++i)
    CHECK(w.grad()[i] == doctest::Approx(w1.grad()[i] + w2.grad()[i]).epsilon(1e-5));
}

TEST_CASE("autograd: parameter gradients accumulate over backward calls until zero_grad") {
  Var w(Tensor::from({2}, {1.0f, -2.0f}), true);
  sum(scale(w, 2.0f)).backward();
  sum(scale(w, 3.0f)).backward();
  CHECK(w.grad()[0] == doctest::Approx(5.0));
  w.zero_grad();
  CHECK(w.grad()[1] == 0.0f);
}

TEST_CASE("autograd: no op records anything under NoGradGuard") {
  Var x(Tensor::from({1, 2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8}), true);
  Var w(Tensor::from({2, 2}, {1, 0, 0, 1}), true);
  Var g(Tensor::from({2}, {1, 1}), true);
  Var e(Tensor::from({3, 2}, {1, 2, 3, 4, 5, 6}), true);
  Rng rng(1);
  Tape& tape = Tape::current();
  const size_t before = tape.size();
  NoGradGuard guard;
  const std::vector<int32_t> ids{0, 2};
  const Var outs[] = {matmul(x, w),
                      batched_matmul(x, x),
                      add(x, g),
                      sub(x, g),
                      mul(x, g),
                      scale(x, 2.0f),
                      relu(x),
                      gelu(x),
                      dropout(x, 0.5f, rng, true),
                      sum(x),
                      mean(x),
                      reshape(x, Shape{8}),
                      transpose(x),
                      merge_heads(x),
                      split_heads(reshape(x, Shape{1, 2, 4}), 2),
                      softmax(x),
                      log_softmax(x),
                      cross_entropy(x, std::vector<int32_t>{0, 1, 0, 1}),
                      layer_norm(x, g, g),
                      embedding(e, ids, Shape{2}),
                      masked_fill(x, Tensor::zeros({1, 1, 1, 2}), 0.0f),
                      head_gate(x, g)};
  for (const Var& out : outs) {
    CHECK_FALSE(out.requires_grad());
    CHECK(out.tape() == nullptr);
  }
  CHECK(tape.size() == before);
}

TEST_CASE("autograd: backward on a non-scalar without a seed names the shape") {
  Var x(Tensor::from({2, 2}, {1, 2, 3, 4}), true);
  Var y = scale(x, 2.0f);
  CHECK_THROWS_WITH_AS(y.backward(), doctest::Contains("output of shape [2, 2] is not a scalar"),
                       Error);
  y.backward(Tensor::full({2, 2}, 1.0f));
  CHECK(x.grad()[3] == doctest::Approx(2.0));
}

TEST_CASE("autograd: inputs recorded on different tapes are an error naming the op") {
  Var x(Tensor::from({2}, {1, 2}), true);
  Tape first, second;
  Var a, b;
  {
    TapeScope scope(first);
    a = scale(x, 2.0f);
  }
  {
    TapeScope scope(second);
    b = scale(x, 3.0f);
  }
  CHECK(a.tape() == &first);
  CHECK(b.tape() == &second);
  CHECK(&Tape::current() != &first);  // the scope restored the thread's own tape
  CHECK_THROWS_WITH_AS(add(a, b), doctest::Contains("add: inputs live on different tapes"), Error);
  first.clear();
  second.clear();
}

TEST_CASE("autograd: the leaf hook names each leaf once, after its last contribution") {
  // w is used by the first op and again late, v only by the last op, u by nothing: v is named
  // first (while w's first use is still to run), w once its earliest use has run, u never
  // (not a leaf of the tape), and each named gradient is already the final one.
  Var x(Tensor::from({2, 2}, {0.5f, -1.0f, 2.0f, 1.5f}));
  Var w(Tensor::from({2, 2}, {0.2f, -0.1f, 0.4f, 1.0f}), true);
  Var v(Tensor::from({2, 2}, {1.0f, 2.0f, -3.0f, 0.5f}), true);
  Var u(Tensor::from({1}, {1.0f}), true);
  Var loss = sum(mul(matmul(gelu(matmul(x, w)), w), v));
  std::vector<const void*> named;
  std::vector<std::vector<float>> at_hook;
  const LeafDone hook = [&](const Var& leaf) {
    named.push_back(leaf.node());
    at_hook.emplace_back(leaf.grad().data(), leaf.grad().data() + leaf.numel());
  };
  loss.tape()->backward(loss, nullptr, &hook);
  REQUIRE(named.size() == 2);
  CHECK(named[0] == v.node());
  CHECK(named[1] == w.node());
  CHECK(at_hook[0] == std::vector<float>(v.grad().data(), v.grad().data() + 4));
  CHECK(at_hook[1] == std::vector<float>(w.grad().data(), w.grad().data() + 4));
  CHECK_FALSE(u.has_grad());
}
