// A registered optimizer's own options ([optim.options]) and state count: declared options are
// resolved with their defaults and checked (unknown key, wrong type, out of range), the state
// count is what the memory estimate uses and must match the optimizer built, and the built-ins
// take no options table and count Adam 2, SGD 1 with momentum and 0 without.

#include <doctest/doctest.h>

#include "core/error.h"
#include "optim/registry.h"
#include "tests/optim/quadratic.h"

using namespace headlab;
using headlab::test::Quadratic;

namespace {

// Plain descent by sign(g) * lr * gain, keeping `slots` zero state tensors.
class Signed : public Optimizer {
 public:
  Signed(NamedParameters params, double lr, double gain, int slots)
      : Optimizer(std::move(params), lr, std::vector<std::string>(slots, "s")), gain_(gain) {}
  const char* name() const override { return "test_signed"; }

 protected:
  void update_parameter(Tensor& value, const Tensor& grad, std::span<Tensor>) override {
    const float step = static_cast<float>(lr() * gain_);
    for (int64_t i = 0; i < value.numel(); ++i)
      value.data()[i] -= grad.data()[i] > 0 ? step : grad.data()[i] < 0 ? -step : 0.0f;
  }

 private:
  double gain_;
};

// Registers "test_signed", declaring `declared` state tensors and keeping `kept`.
struct Registered {
  explicit Registered(int declared, int kept = -1) {
    if (kept < 0) kept = declared;
    register_optimizer("test_signed",
                       [kept](const OptimizerOptions& o, NamedParameters params) {
                         return std::make_unique<Signed>(std::move(params), o.lr,
                                                         option_real(o.options, "gain"), kept);
                       },
                       declared,
                       {{"gain", OptionSpec::real(0, 10, true).documented("Step multiplier."), 1.0},
                        {"label", OptionSpec::one_of({"a", "b"}), std::string("a")}});
  }
  ~Registered() { unregister_optimizer("test_signed"); }
};

}  // namespace

TEST_CASE("optim: a registered optimizer reads its declared options, defaults filled") {
  Registered registered(0);
  Quadratic q;
  std::unique_ptr<Optimizer> opt =
      make_optimizer({.name = "test_signed", .lr = 0.1, .options = {{"gain", 2}}}, q.params);
  const std::vector<float> before = q.values();
  q.set_grads();
  opt->step();
  for (size_t i = 0; i < before.size(); ++i) {
    const double g = q.a[i] * (before[i] - q.c[i]);
    CHECK(q.values()[i] == before[i] - static_cast<float>(0.1 * 2.0) * (g > 0 ? 1.0f : -1.0f));
  }
  CHECK(optimizer_declared_options("test_signed").size() == 2);
  const OptionMap resolved = resolve_declared_options(
      "optim.options", optimizer_declared_options("test_signed"), {{"gain", 3}});
  CHECK(option_real(resolved, "gain") == 3.0);
  CHECK(option_string(resolved, "label") == "a");
}

TEST_CASE("optim: undeclared, mistyped and out-of-range optimizer options are one line each") {
  Registered registered(0);
  Quadratic q;
  auto error = [&](OptionMap options) {
    try {
      make_optimizer({.name = "test_signed", .options = std::move(options)}, q.params);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  CHECK(error({{"gian", 2.0}}) ==
        "unknown key optim.options.gian (did you mean optim.options.gain?)");
  CHECK(error({{"zzzz", 2.0}}) == "unknown key optim.options.zzzz (known: gain, label)");
  CHECK(error({{"gain", 0.0}}) ==
        "optim.options.gain = 0.0 is out of range: expected a number in (0.0, 10.0]");
  CHECK(error({{"gain", "big"}}).starts_with("optim.options.gain has type string but expected"));
  CHECK(error({{"label", "c"}}).starts_with("optim.options.label = \"c\" is not one of"));
  // The built-ins declare no table: their options are the [optim] keys.
  CHECK_THROWS_WITH_AS(
      make_optimizer({.name = "adam", .options = {{"gain", 2.0}}}, q.params),
      doctest::Contains("unknown key optim.options.gain (this table takes no keys)"), Error);
}

TEST_CASE("optim: state tensors per parameter as declared, checked against the optimizer") {
  CHECK(optimizer_state_tensors({.name = "adam"}) == 2);
  CHECK(optimizer_state_tensors({.name = "adamw"}) == 2);
  CHECK(optimizer_state_tensors({.name = "sgd"}) == 0);
  CHECK(optimizer_state_tensors({.name = "sgd", .momentum = 0.9}) == 1);
  CHECK_THROWS_WITH_AS(optimizer_state_tensors({.name = "nope"}),
                       doctest::Contains("expected one of: adam, adamw, sgd"), Error);
  Quadratic q;
  {
    Registered registered(1);
    CHECK(optimizer_state_tensors({.name = "test_signed"}) == 1);
    CHECK(make_optimizer({.name = "test_signed"}, q.params)->state_names().size() == 1);
  }
  Registered lying(1, 2);
  CHECK_THROWS_WITH_AS(
      make_optimizer({.name = "test_signed"}, q.params),
      doctest::Contains("registered with 1 state tensors per parameter but keeps 2"), Error);
  CHECK_THROWS_WITH_AS(
      register_optimizer(
          "x", [](const OptimizerOptions&, NamedParameters) { return nullptr; }, -2),
      doctest::Contains("expected >= 0"), Error);
}
