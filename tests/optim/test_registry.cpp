// The optimizer registry: a registered name builds through make_optimizer, is listed with the
// built-ins, saves and resumes its state bit for bit, and is gone after unregistering.

#include <doctest/doctest.h>

#include <cmath>
#include <memory>

#include "core/error.h"
#include "optim/registry.h"
#include "tests/optim/quadratic.h"

using namespace headlab;
using headlab::test::clone_params;
using headlab::test::Quadratic;
using headlab::test::same_bits;

namespace {

// Lion-style update (sign of interpolated momentum, decoupled decay), one state slot.
class SignMomentum : public Optimizer {
 public:
  SignMomentum(NamedParameters params, double lr, double wd)
      : Optimizer(std::move(params), lr, {"exp_avg"}), wd_(wd) {}
  const char* name() const override { return "sign_momentum"; }

 protected:
  void update_parameter(Tensor& value, const Tensor& grad, std::span<Tensor> state) override {
    const float rate = static_cast<float>(lr());
    const float decay = static_cast<float>(1.0 - lr() * wd_);
    float* p = value.data();
    const float* g = grad.data();
    float* m = state[0].data();
    for (int64_t i = 0; i < value.numel(); ++i) {
      const float c = 0.9f * m[i] + 0.1f * g[i];
      p[i] = p[i] * decay - rate * (c > 0.0f ? 1.0f : c < 0.0f ? -1.0f : 0.0f);
      m[i] = 0.99f * m[i] + 0.01f * g[i];
    }
  }

 private:
  double wd_;
};

// Registers "sign_momentum" for one test case.
struct Registered {
  Registered() {
    register_optimizer("sign_momentum", [](const OptimizerOptions& o, NamedParameters params) {
      return std::make_unique<SignMomentum>(std::move(params), o.lr, o.weight_decay);
    });
  }
  ~Registered() { unregister_optimizer("sign_momentum"); }
};

}  // namespace

TEST_CASE("optim: a registered optimizer builds by name and is listed with the built-ins") {
  Registered registered;
  Quadratic q;
  CHECK(has_optimizer("sign_momentum"));
  CHECK(registered_optimizers() ==
        std::vector<std::string>{"adam", "adamw", "sgd", "sign_momentum"});
  std::unique_ptr<Optimizer> opt =
      make_optimizer({.name = "sign_momentum", .lr = 0.01, .weight_decay = 0.5}, q.params);
  CHECK(std::string(opt->name()) == "sign_momentum");
  // One step by hand: m = 0, so c = 0.1 g and p <- p (1 - lr wd) - lr sign(g).
  const std::vector<float> before = q.values();
  q.set_grads();
  std::vector<float> expected;
  for (size_t i = 0; i < before.size(); ++i) {
    const float g = static_cast<float>(q.a[i]) * (before[i] - static_cast<float>(q.c[i]));
    expected.push_back(before[i] * static_cast<float>(1.0 - 0.01 * 0.5) -
                       0.01f * (g > 0 ? 1.0f : -1.0f));
  }
  opt->step();
  CHECK(q.values() == expected);
  CHECK_THROWS_WITH_AS(make_optimizer({.name = "sign_momentum", .momentum = 0.9}, q.params),
                       doctest::Contains("sgd only"), Error);
  CHECK_THROWS_WITH_AS(make_optimizer({.name = "adagrad"}, q.params),
                       doctest::Contains("expected one of: adam, adamw, sgd, sign_momentum"),
                       Error);
}

TEST_CASE("optim: a registered optimizer's state saves and resumes bit for bit") {
  Registered registered;
  const OptimizerOptions o{.name = "sign_momentum", .lr = 0.01, .weight_decay = 0.1};
  Quadratic straight, resumed;
  std::unique_ptr<Optimizer> a = make_optimizer(o, straight.params);
  std::unique_ptr<Optimizer> b = make_optimizer(o, resumed.params);
  for (int s = 0; s < 4; ++s) {
    straight.set_grads();
    a->step();
    resumed.set_grads();
    b->step();
  }
  const StateDict saved = b->state_dict();
  NamedParameters copy = clone_params(resumed.params);
  resumed.params = copy;
  std::unique_ptr<Optimizer> c = make_optimizer(o, resumed.params);
  c->load_state_dict(saved);
  CHECK(c->step_count() == 4);
  for (int s = 0; s < 4; ++s) {
    straight.set_grads();
    a->step();
    resumed.set_grads();
    c->step();
  }
  CHECK(same_bits(straight.params, resumed.params));
}

TEST_CASE("optim: the optimizer registry refuses bad names and keeps the built-ins") {
  auto factory = [](const OptimizerOptions& o, NamedParameters params) {
    return std::make_unique<SignMomentum>(std::move(params), o.lr, 0.0);
  };
  CHECK_THROWS_WITH_AS(register_optimizer("", factory), doctest::Contains("empty"), Error);
  CHECK_THROWS_WITH_AS(register_optimizer("adam", factory), doctest::Contains("built-in"), Error);
  CHECK_THROWS_WITH_AS(unregister_optimizer("sgd"), doctest::Contains("built-in"), Error);
  Registered registered;
  CHECK_THROWS_WITH_AS(register_optimizer("sign_momentum", factory),
                       doctest::Contains("already registered"), Error);
  unregister_optimizer("not_there");  // a no-op
  CHECK(has_optimizer("adam"));
}
