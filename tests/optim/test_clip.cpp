// Global-norm clipping: the norm spans all parameters, nothing changes at or below the
// threshold, and a non-finite norm is reported without touching any gradient.

#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "core/error.h"
#include "optim/clip.h"

using namespace headlab;

namespace {

NamedParameters three_params() {
  // Gradients {3, 4} and {12} (norm 13); the third parameter has no gradient.
  NamedParameters ps;
  ps.push_back({"a", Var(Tensor::zeros({2}), true)});
  ps.push_back({"b", Var(Tensor::zeros({1}), true)});
  ps.push_back({"c", Var(Tensor::zeros({4}), true)});
  ps[0].var.grad() = Tensor::from({2}, {3, 4});
  ps[1].var.grad() = Tensor::from({1}, {12});
  return ps;
}

}  // namespace

TEST_CASE("optim: grad_norm spans all parameters") {
  CHECK(grad_norm(three_params()) == 13.0);
  // A long tensor, accumulated in double: 10^6 elements of 1e-3 give 1e-6 * 10^6 = 1.
  NamedParameters ps;
  ps.push_back({"w", Var(Tensor::zeros({1000, 1000}), true)});
  ps[0].var.grad() = Tensor::full({1000, 1000}, 1e-3f);
  CHECK(grad_norm(ps) == doctest::Approx(1.0).epsilon(1e-7));
}

TEST_CASE("optim: clip_grad_norm scales every gradient by one factor above the threshold") {
  NamedParameters ps = three_params();
  const double norm = clip_grad_norm(ps, 6.5);
  CHECK(norm == 13.0);  // the norm before clipping
  const double factor = 6.5 / (13.0 + 1e-6);
  CHECK(ps[0].var.grad()[0] == doctest::Approx(3 * factor));
  CHECK(ps[0].var.grad()[1] == doctest::Approx(4 * factor));
  CHECK(ps[1].var.grad()[0] == doctest::Approx(12 * factor));
  CHECK_FALSE(ps[2].var.has_grad());
  CHECK(grad_norm(ps) == doctest::Approx(6.5).epsilon(1e-6));
}

TEST_CASE("optim: clip_grad_norm is a no-op at or below the threshold and when off") {
  for (double max_norm : {13.0, 20.0, 0.0}) {
    NamedParameters ps = three_params();
    CHECK(clip_grad_norm(ps, max_norm) == 13.0);
    CHECK(ps[0].var.grad().to_vector() == std::vector<float>{3, 4});
    CHECK(ps[1].var.grad().to_vector() == std::vector<float>{12});
  }
  CHECK_THROWS_AS(clip_grad_norm(three_params(), NAN), Error);
}

TEST_CASE("optim: clip_grad_norm reports a non-finite norm and leaves gradients alone") {
  for (float bad : {std::numeric_limits<float>::infinity(), std::nanf("")}) {
    NamedParameters ps = three_params();
    ps[1].var.grad()[0] = bad;
    const double norm = clip_grad_norm(ps, 1.0);
    CHECK_FALSE(std::isfinite(norm));
    CHECK(ps[0].var.grad().to_vector() == std::vector<float>{3, 4});
  }
  // Finite gradients whose squares overflow float still give the right norm (double sums).
  NamedParameters ps = three_params();
  ps[0].var.grad() = Tensor::from({2}, {3e30f, 4e30f});
  ps[1].var.grad() = Tensor::from({1}, {0});
  CHECK(clip_grad_norm(ps, 1.0) == doctest::Approx(5e30));
}
