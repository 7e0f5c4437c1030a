#include <doctest/doctest.h>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "autograd/tape.h"
#include "core/error.h"

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
