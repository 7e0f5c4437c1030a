// Parameter groups: glob patterns over parameter names, no_decay exempts a parameter from weight
// decay (AdamW's decoupled and SGD's L2 alike) and lr_scale scales its step; a pattern that
// matches nothing is an error naming it. Each update is checked against a hand computation.

#include <doctest/doctest.h>

#include <cmath>

#include "core/error.h"
#include "optim/factory.h"
#include "optim/param_groups.h"
#include "tests/optim/quadratic.h"

using namespace headlab;
using headlab::test::Quadratic;

TEST_CASE("optim: glob_match matches whole names with * and ?") {
  CHECK(glob_match("*.bias", "encoder.layers.0.ffn.linear1.bias"));
  CHECK_FALSE(glob_match("*.bias", "encoder.layers.0.ffn.linear1.weight"));
  CHECK(glob_match("*norm*", "encoder.layers.0.norm1.weight"));
  CHECK(glob_match("embedding.*", "embedding.weight"));
  CHECK_FALSE(glob_match("embedding.*", "pos_embedding.weight"));
  CHECK(glob_match("layer.?ias", "layer.bias"));
  CHECK_FALSE(glob_match("layer.?ias", "layer.bbias"));
  CHECK(glob_match("*", ""));
  CHECK(glob_match("a*b*c", "aXXbYYc"));
  CHECK_FALSE(glob_match("a*b*c", "aXXbYY"));
}

TEST_CASE("optim: no_decay skips AdamW's decoupled decay and SGD's L2 for matching parameters") {
  // SGD without momentum: p <- p - lr (g + wd p) for "layer.weight", p - lr g for "layer.bias".
  Quadratic q;
  const double lr = 0.1, wd = 0.5;
  std::unique_ptr<Optimizer> sgd = make_optimizer(
      {.name = "sgd", .lr = lr, .weight_decay = wd, .no_decay = {"*.bias"}}, q.params);
  const std::vector<float> before = q.values();
  q.set_grads();
  std::vector<float> expected;
  for (size_t i = 0; i < before.size(); ++i) {
    const float g = static_cast<float>(q.a[i]) * (before[i] - static_cast<float>(q.c[i]));
    const float decay = i < 6 ? static_cast<float>(wd) : 0.0f;
    expected.push_back(before[i] - static_cast<float>(lr) * (g + decay * before[i]));
  }
  sgd->step();
  CHECK(q.values() == expected);

  // AdamW's first step: m_hat = g, v_hat = g^2, so p <- p (1 - lr wd) - lr g / (|g| + eps).
  Quadratic r;
  std::unique_ptr<Optimizer> adamw = make_optimizer(
      {.name = "adamw", .lr = lr, .weight_decay = wd, .no_decay = {"layer.weight"}}, r.params);
  const std::vector<float> start = r.values();
  r.set_grads();
  adamw->step();
  const std::vector<float> after = r.values();
  for (size_t i = 0; i < start.size(); ++i) {
    const double g = r.a[i] * (start[i] - r.c[i]);
    const double decayed = i < 6 ? start[i] : start[i] * (1 - lr * wd);
    CHECK(after[i] == doctest::Approx(decayed - lr * g / (std::abs(g) + 1e-8)).epsilon(1e-6));
  }
}

TEST_CASE("optim: lr_scale multiplies the step of matching parameters") {
  // SGD: p <- p - lr * scale * g, the weight at scale 0.25, the bias at 1.
  Quadratic q;
  const double lr = 0.1;
  std::unique_ptr<Optimizer> sgd =
      make_optimizer({.name = "sgd", .lr = lr, .lr_scale = {{"*.weight", 0.25}}}, q.params);
  const std::vector<float> before = q.values();
  q.set_grads();
  sgd->step();
  const std::vector<float> after = q.values();
  for (size_t i = 0; i < before.size(); ++i) {
    const float g = static_cast<float>(q.a[i]) * (before[i] - static_cast<float>(q.c[i]));
    const float rate = static_cast<float>(lr * (i < 6 ? 0.25 : 1.0));
    CHECK(after[i] == before[i] - rate * g);
  }
  CHECK(sgd->lr() == lr);  // the scale applies inside the update only
  CHECK(sgd->parameter_groups()[0].lr_scale == 0.25);

  // Adam's step size scales too: the first step moves each element by ~lr * scale.
  Quadratic r;
  std::unique_ptr<Optimizer> adam =
      make_optimizer({.name = "adam", .lr = lr, .lr_scale = {{"layer.bias", 0.5}}}, r.params);
  const std::vector<float> start = r.values();
  r.set_grads();
  adam->step();
  const std::vector<float> moved = r.values();
  for (size_t i = 0; i < start.size(); ++i)
    CHECK(std::abs(moved[i] - start[i]) == doctest::Approx(lr * (i < 6 ? 1.0 : 0.5)).epsilon(1e-5));
}

TEST_CASE("optim: parameter group patterns that match nothing or overlap are errors") {
  Quadratic q;
  CHECK_THROWS_WITH_AS(make_optimizer({.name = "adam", .no_decay = {"*.bais"}}, q.params),
                       doctest::Contains("optim.no_decay: pattern \"*.bais\" matches no parameter"),
                       Error);
  CHECK_THROWS_WITH_AS(make_optimizer({.name = "adam", .lr_scale = {{"emb.*", 0.1}}}, q.params),
                       doctest::Contains("optim.lr_scale: pattern \"emb.*\" matches no parameter"),
                       Error);
  CHECK_THROWS_WITH_AS(
      make_optimizer({.name = "adam", .lr_scale = {{"layer.*", 0.1}, {"*.bias", 2.0}}}, q.params),
      doctest::Contains("parameter \"layer.bias\" matches both \"layer.*\" and \"*.bias\""), Error);
  CHECK_THROWS_WITH_AS(make_optimizer({.name = "adam", .lr_scale = {{"*", -1.0}}}, q.params),
                       doctest::Contains("expected a finite number >= 0"), Error);
}
