// SGD, with and without (Nesterov) momentum, against plain double-precision loops:
// p <- p - lr * d (d = g + wd * p); heavy ball b <- mu * b + d, p <- p - lr * b; Nesterov
// (Sutskever et al. 2013, in PyTorch's form) p <- p - lr * (d + mu * b).

#include <doctest/doctest.h>

#include "core/error.h"
#include "optim/sgd.h"
#include "tests/optim/quadratic.h"

using namespace headlab;
using headlab::test::Quadratic;

namespace {

std::vector<double> sgd_reference(const Quadratic& q, int steps, const SgdOptions& o) {
  std::vector<double> x = q.start, b(x.size(), 0.0);
  for (int t = 1; t <= steps; ++t) {
    const std::vector<double> g = q.grad_at(x);
    for (size_t i = 0; i < x.size(); ++i) {
      const double d = g[i] + o.weight_decay * x[i];
      if (o.momentum == 0.0) {
        x[i] -= o.lr * d;
        continue;
      }
      b[i] = t == 1 ? d : o.momentum * b[i] + d;
      x[i] -= o.lr * (o.nesterov ? d + o.momentum * b[i] : b[i]);
    }
  }
  return x;
}

void check_trajectory(const SgdOptions& o) {
  Quadratic q;
  Sgd sgd(q.params, o);
  for (int t = 1; t <= 15; ++t) {
    q.set_grads();
    sgd.step();
    const std::vector<double> expected = sgd_reference(q, t, o);
    const std::vector<float> actual = q.values();
    for (size_t i = 0; i < expected.size(); ++i)
      CHECK(actual[i] == doctest::Approx(expected[i]).epsilon(1e-6).scale(1.0));
  }
}

}  // namespace

TEST_CASE("optim: sgd trajectory without momentum") {
  check_trajectory({.lr = 0.1});
  check_trajectory({.lr = 0.1, .weight_decay = 0.3});
}

TEST_CASE("optim: sgd trajectory with momentum") {
  check_trajectory({.lr = 0.1, .momentum = 0.9});
  check_trajectory({.lr = 0.05, .momentum = 0.5, .weight_decay = 0.3});
}

TEST_CASE("optim: sgd trajectory with nesterov momentum") {
  check_trajectory({.lr = 0.1, .momentum = 0.9, .nesterov = true});
  check_trajectory({.lr = 0.05, .momentum = 0.7, .nesterov = true, .weight_decay = 0.3});
}

TEST_CASE("optim: sgd keeps a momentum buffer only with momentum") {
  Quadratic q;
  CHECK(Sgd(q.params, {.lr = 0.1}).state_dict().size() == 1);  // only "step"
  const StateDict with = Sgd(q.params, {.lr = 0.1, .momentum = 0.9}).state_dict();
  REQUIRE(with.size() == 3);
  CHECK(with[0].name == "momentum_buffer.layer.weight");
  CHECK(with[1].name == "momentum_buffer.layer.bias");
}

TEST_CASE("optim: sgd rejects bad options") {
  Quadratic q;
  CHECK_THROWS_WITH_AS(Sgd(q.params, {.lr = 0.1, .nesterov = true}),
                       doctest::Contains("nesterov needs momentum"), Error);
  CHECK_THROWS_WITH_AS(Sgd(q.params, {.lr = 0.1, .momentum = -0.5}),
                       doctest::Contains("sgd: momentum"), Error);
  CHECK_THROWS_WITH_AS(Sgd(q.params, {.lr = -0.1}), doctest::Contains("sgd: lr"), Error);
}
