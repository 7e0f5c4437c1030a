// register_op: an op registered with its gradcheck cases is checked from them (every input, the
// case's options and dims), on every backend; a wrong backward fails; the registration refuses
// bad entries in one line; unregister_op undoes it.

#include <doctest/doctest.h>

#include <span>
#include <string>
#include <vector>

#include "autograd/op_registry.h"
#include "autograd/ops.h"
#include "core/error.h"
#include "tests/autograd/backend_scope.h"

using namespace headlab;

namespace {

// a * b^2 summed over the case's dim, scaled by its option "k": two inputs, a dim, an option.
Var scaled_weighted_sum(std::span<const Var> in, const OpCase& c) {
  return scale(sum(mul(in[0], mul(in[1], in[1])), c.dims.at(0)), static_cast<float>(c.option("k")));
}

const std::vector<OpCase> kCases = {
    {"dim 0, k 2", {{3, 4}, {3, 4}}, {0}, {{"k", 2.0}}},
    {"dim -1, b broadcast, k -0.5", {{2, 3}, {3}}, {-1}, {{"k", -0.5}}},
    {"size-1 dims, spread 2", {{1, 3, 1}, {1, 3, 1}}, {1}, {{"k", 1.0}}, 2.0f, 0.5f},
};

}  // namespace

TEST_CASE("autograd: a registered op is gradchecked from its cases on every backend") {
  register_op("test_scaled_weighted_sum", scaled_weighted_sum, kCases);
  CHECK(has_op("test_scaled_weighted_sum"));
  std::vector<std::string> variants;
  for (const GradcheckCase& c : registered_op_gradcheck_cases()) {
    if (c.name != "test_scaled_weighted_sum") continue;
    CHECK(c.kind == "op");
    variants.push_back(c.variant);
    for (Backend backend : test::kAllBackends) {
      test::BackendScope scope(backend);
      const GradcheckResult r = c.run(7);
      CAPTURE(c.variant);
      CHECK_MESSAGE(r.pass, r.worst);
      CHECK(r.inputs == 2);  // every input is checked
    }
  }
  CHECK(variants == std::vector<std::string>{"dim 0, k 2", "dim -1, b broadcast, k -0.5",
                                             "size-1 dims, spread 2"});
  CHECK_THROWS_WITH_AS(register_op("test_scaled_weighted_sum", scaled_weighted_sum, kCases),
                       "register_op: an op named 'test_scaled_weighted_sum' is already registered",
                       Error);
  unregister_op("test_scaled_weighted_sum");
  CHECK_FALSE(has_op("test_scaled_weighted_sum"));
  unregister_op("test_scaled_weighted_sum");  // unknown: a no-op
}

TEST_CASE("autograd: a registered op with a wrong backward fails its gradcheck cases") {
  // x^2 forward; x - (x as a constant) adds 0 to the value but 1 to the gradient.
  register_op("test_wrong_square",
              [](std::span<const Var> in, const OpCase&) {
                return add(mul(in[0], in[0]), sub(in[0], Var(in[0].value(), false)));
              },
              {{"plain", {{2, 3}}}});
  int failed = 0;
  for (const GradcheckCase& c : registered_op_gradcheck_cases())
    if (c.name == "test_wrong_square") {
      const GradcheckResult r = c.run(1);
      CHECK_FALSE(r.pass);
      CHECK(r.worst.find("analytic") != std::string::npos);
      ++failed;
    }
  unregister_op("test_wrong_square");
  CHECK(failed == 1);
}

TEST_CASE("autograd: register_op refuses bad entries in one line") {
  const OpFunction same = [](std::span<const Var> in, const OpCase&) { return in[0]; };
  const auto refuses = [&](std::string name, OpFunction f, std::vector<OpCase> cases,
                           const std::string& message) {
    CHECK_THROWS_WITH_AS(register_op(std::move(name), std::move(f), std::move(cases)),
                         message.c_str(), Error);
  };
  refuses("", same, {{"plain", {{2}}}}, "register_op: the name is empty");
  refuses("softmax", same, {{"plain", {{2}}}}, "register_op: 'softmax' is a built-in op");
  refuses("test_op", nullptr, {{"plain", {{2}}}},
          "register_op: the function of op 'test_op' is empty");
  refuses("test_op", same, {},
          "register_op: op 'test_op' has no gradcheck case (give several: shapes, dims, options)");
  refuses("test_op", same, {{"", {{2}}}},
          "register_op: a gradcheck case of op 'test_op' has no variant");
  refuses("test_op", same, {{"plain", {}}},
          "register_op: gradcheck case 'plain' of op 'test_op' has no input shape");
  refuses("test_op", same, {{"plain", {{2}}}, {"plain", {{3}}}},
          "register_op: op 'test_op' has two gradcheck cases named 'plain'");
  CHECK_FALSE(has_op("test_op"));
  const OpCase c{"plain", {{2}}, {}, {{"b", 1.0}}};
  CHECK(c.option("b") == 1.0);
  CHECK_THROWS_WITH_AS(c.option("beta"), "op case 'plain': no option 'beta' (it has: b)", Error);
}
