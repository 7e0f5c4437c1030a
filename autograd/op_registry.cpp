#include "autograd/op_registry.h"

#include <algorithm>
#include <set>
#include <utility>

#include "autograd/checks/op_checks.h"
#include "core/error.h"
#include "core/rng.h"

namespace headlab {
namespace {

struct Entry {
  OpFunction function;
  std::vector<OpCase> cases;
};
using Registry = std::map<std::string, Entry, std::less<>>;

Registry& registry() {
  static Registry r;
  return r;
}

bool is_builtin(std::string_view name) {
  static const std::vector<std::string> builtin = differentiable_op_names();
  return std::find(builtin.begin(), builtin.end(), name) != builtin.end();
}

void check_cases(const std::string& name, const std::vector<OpCase>& cases) {
  if (cases.empty())
    fail("register_op: op '{}' has no gradcheck case (give several: shapes, dims, options)", name);
  std::set<std::string> variants;
  for (const OpCase& c : cases) {
    if (c.variant.empty()) fail("register_op: a gradcheck case of op '{}' has no variant", name);
    if (!variants.insert(c.variant).second)
      fail("register_op: op '{}' has two gradcheck cases named '{}'", name, c.variant);
    if (c.inputs.empty())
      fail("register_op: gradcheck case '{}' of op '{}' has no input shape", c.variant, name);
    if (!(c.eps > 0))
      fail("register_op: gradcheck case '{}' of op '{}' has eps {} (expected > 0)", c.variant, name,
           c.eps);
  }
}

}  // namespace

double OpCase::option(std::string_view key) const {
  auto it = options.find(std::string(key));
  if (it == options.end()) {
    std::string known;
    for (const auto& [k, v] : options) known += (known.empty() ? "" : ", ") + k;
    fail("op case '{}': no option '{}' (it has: {})", variant, key, known.empty() ? "none" : known);
  }
  return it->second;
}

void register_op(std::string name, OpFunction function, std::vector<OpCase> cases) {
  if (name.empty()) fail("register_op: the name is empty");
  if (is_builtin(name)) fail("register_op: '{}' is a built-in op", name);
  if (!function) fail("register_op: the function of op '{}' is empty", name);
  check_cases(name, cases);
  if (has_op(name)) fail("register_op: an op named '{}' is already registered", name);
  registry().emplace(std::move(name), Entry{std::move(function), std::move(cases)});
}

void unregister_op(std::string_view name) {
  auto it = registry().find(name);
  if (it != registry().end()) registry().erase(it);
}

bool has_op(std::string_view name) {
  return registry().find(name) != registry().end();
}

std::vector<std::string> registered_ops() {
  std::vector<std::string> names;
  for (const auto& [name, entry] : registry()) names.push_back(name);
  return names;
}

GradcheckCase op_gradcheck_case(const std::string& name, const OpFunction& function,
                                const OpCase& c) {
  auto run = [function, c](uint64_t seed) {
    Rng rng(seed);
    std::vector<Var> inputs;
    for (const Shape& shape : c.inputs) {
      Tensor t = Tensor::empty(shape);
      for (int64_t i = 0; i < t.numel(); ++i) t[i] = c.shift + c.scale * rng.normal();
      inputs.emplace_back(t, true);
    }
    GradcheckOptions options;
    options.seed = seed * 0x9E3779B97F4A7C15ull + 1;  // projection independent of the inputs
    options.eps = c.eps;
    return gradcheck([&] { return function(inputs, c); }, inputs, options);
  };
  return GradcheckCase{name, "op", std::move(run), c.variant};
}

std::vector<GradcheckCase> registered_op_gradcheck_cases() {
  std::vector<GradcheckCase> cases;
  for (const auto& [name, entry] : registry())
    for (const OpCase& c : entry.cases) cases.push_back(op_gradcheck_case(name, entry.function, c));
  return cases;
}

}  // namespace headlab
