// Adam and AdamW against plain double-precision loops written from the papers' formulas:
// Kingma & Ba (2015), Algorithm 1, and Loshchilov & Hutter (2019), Algorithm 2 with the
// schedule multiplier eta_t = lr (as PyTorch's AdamW).

#include <doctest/doctest.h>

#include <cmath>

#include "core/error.h"
#include "optim/adam.h"
#include "tests/optim/quadratic.h"

using namespace headlab;
using headlab::test::Quadratic;

namespace {

// A learning rate that changes every step, as a schedule would set it.
double lr_for(int t) {
  return 0.02 * (1.0 + 0.1 * t);
}

// Reference trajectory in double. decoupled: AdamW's p <- p - lr * wd * p; otherwise the
// decay is L2 folded into the gradient.
std::vector<double> adam_reference(const Quadratic& q, int steps, const AdamOptions& o,
                                   bool decoupled) {
  std::vector<double> x = q.start, m(x.size(), 0.0), v(x.size(), 0.0);
  for (int t = 1; t <= steps; ++t) {
    const double lr = lr_for(t);
    std::vector<double> g = q.grad_at(x);
    for (size_t i = 0; i < x.size(); ++i) {
      if (!decoupled) g[i] += o.weight_decay * x[i];
      m[i] = o.beta1 * m[i] + (1 - o.beta1) * g[i];
      v[i] = o.beta2 * v[i] + (1 - o.beta2) * g[i] * g[i];
      const double m_hat = m[i] / (1 - std::pow(o.beta1, t));
      const double v_hat = v[i] / (1 - std::pow(o.beta2, t));
      const double decay = decoupled ? o.weight_decay * x[i] : 0.0;
      x[i] -= lr * (m_hat / (std::sqrt(v_hat) + o.eps) + decay);
    }
  }
  return x;
}

void run_and_compare(Optimizer& opt, const Quadratic& q, const AdamOptions& o, bool decoupled) {
  for (int t = 1; t <= 12; ++t) {
    q.set_grads();
    opt.set_lr(lr_for(t));
    opt.step();
    CHECK(opt.step_count() == t);
    const std::vector<double> expected = adam_reference(q, t, o, decoupled);
    const std::vector<float> actual = q.values();
    for (size_t i = 0; i < expected.size(); ++i)
      CHECK(actual[i] == doctest::Approx(expected[i]).epsilon(1e-6).scale(1.0));
  }
}

}  // namespace

TEST_CASE("optim: adam trajectory matches Kingma & Ba's algorithm in double") {
  Quadratic q;
  const AdamOptions o{.lr = 0.02, .beta1 = 0.9, .beta2 = 0.98, .eps = 1e-8};
  Adam adam(q.params, o);
  CHECK(std::string(adam.name()) == "adam");
  run_and_compare(adam, q, o, false);
}

TEST_CASE("optim: adam with weight decay adds L2 to the gradient") {
  Quadratic q;
  const AdamOptions o{.lr = 0.02, .weight_decay = 0.5};
  Adam adam(q.params, o);
  run_and_compare(adam, q, o, false);
}

TEST_CASE("optim: adamw trajectory matches decoupled weight decay in double") {
  Quadratic q;
  const AdamOptions o{.lr = 0.02, .beta1 = 0.8, .beta2 = 0.99, .eps = 1e-6, .weight_decay = 0.5};
  AdamW adamw(q.params, o);
  CHECK(std::string(adamw.name()) == "adamw");
  run_and_compare(adamw, q, o, true);
  // The same run as coupled L2 ends elsewhere: the decay form matters here.
  const std::vector<double> coupled = adam_reference(q, 12, o, false);
  const std::vector<float> actual = q.values();
  double diff = 0;
  for (size_t i = 0; i < coupled.size(); ++i) diff += std::abs(actual[i] - coupled[i]);
  CHECK(diff > 1e-3);
}

TEST_CASE("optim: adam's first step is lr * g / (|g| + eps) by bias correction") {
  // At t = 1, m_hat = g and v_hat = g^2, so every element moves by lr * sign(g) (up to eps),
  // whatever the betas; without bias correction it would move by lr * (1-b1) / sqrt(1-b2).
  Quadratic q;
  const std::vector<float> before = q.values();
  Adam adam(q.params, {.lr = 0.01, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8});
  q.set_grads();
  std::vector<float> g;
  for (const auto& p : q.params)
    for (float x : p.var.grad().span()) g.push_back(x);
  adam.step();
  const std::vector<float> after = q.values();
  for (size_t i = 0; i < g.size(); ++i) {
    const double expected = -0.01 * g[i] / (std::abs(g[i]) + 1e-8);
    CHECK(after[i] - before[i] == doctest::Approx(expected).epsilon(1e-4));
  }
}

TEST_CASE("optim: adam counts one step per step() over several parameters") {
  Quadratic q;
  Adam adam(q.params);
  CHECK(adam.step_count() == 0);
  q.set_grads();
  adam.step();
  CHECK(adam.step_count() == 1);  // two parameters, one step
  adam.step();
  CHECK(adam.step_count() == 2);
}

TEST_CASE("optim: adam skips a parameter without a gradient and keeps its state at zero") {
  Quadratic q;
  Adam adam(q.params, {.lr = 0.1});
  q.set_grads();
  q.params[1].var.clear_grad();
  const std::vector<float> bias_before = q.params[1].var.value().to_vector();
  adam.step();
  CHECK(q.params[1].var.value().to_vector() == bias_before);
  CHECK(q.params[0].var.value()[0] != doctest::Approx(q.start[0]));
  for (const auto& t : adam.state_dict())
    if (t.name == "exp_avg.layer.bias" || t.name == "exp_avg_sq.layer.bias")
      for (float x : t.tensor.span()) CHECK(x == 0.0f);
}

TEST_CASE("optim: adam allocates its moments once") {
  Quadratic q;
  Adam adam(q.params);
  q.set_grads();
  adam.step();
  std::vector<const float*> first;
  for (const auto& t : adam.state_dict()) first.push_back(t.tensor.data());
  for (int i = 0; i < 3; ++i) {
    q.set_grads();
    adam.step();
  }
  const StateDict later = adam.state_dict();
  // The moments are the same buffers (the "step" entry is built fresh each time).
  for (size_t i = 0; i + 1 < later.size(); ++i) CHECK(later[i].tensor.data() == first[i]);
}

TEST_CASE("optim: adam rejects bad options and parameter lists") {
  Quadratic q;
  CHECK_THROWS_WITH_AS(Adam(q.params, {.beta1 = 1.0}), doctest::Contains("beta1"), Error);
  CHECK_THROWS_WITH_AS(Adam(q.params, {.beta2 = -0.1}), doctest::Contains("beta2"), Error);
  CHECK_THROWS_WITH_AS(Adam(q.params, {.eps = -1}), doctest::Contains("eps"), Error);
  CHECK_THROWS_WITH_AS(AdamW(q.params, {.weight_decay = NAN}),
                       doctest::Contains("adamw: weight_decay"), Error);
  CHECK_THROWS_WITH_AS(Adam(q.params, {.lr = INFINITY}), doctest::Contains("lr"), Error);
  CHECK_THROWS_WITH_AS(Adam(NamedParameters{}), doctest::Contains("empty"), Error);
  NamedParameters twice = q.params;
  twice[1].name = twice[0].name;
  CHECK_THROWS_WITH_AS(Adam{twice}, doctest::Contains("repeats"), Error);
  NamedParameters aliased = q.params;
  aliased[1].var = aliased[0].var;
  CHECK_THROWS_WITH_AS(Adam{aliased}, doctest::Contains("same Var"), Error);
  Adam adam(q.params);
  CHECK_THROWS_WITH_AS(adam.set_lr(-1), doctest::Contains("adam: lr"), Error);
}
