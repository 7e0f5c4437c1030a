#pragma once
// Ops registered from outside the library (a plugin's PluginRegistry::add_op, or a program's own
// register_op), each with its gradcheck cases: `headlab gradcheck` runs them on every backend
// beside the built-in ops' cases (autograd/checks/op_checks.h), and `--only NAME` selects one.
//
//   // squareplus(x) = (x + sqrt(x^2 + b)) / 2
//   headlab::register_op(
//       "squareplus",
//       [](std::span<const headlab::Var> in, const headlab::OpCase& c) {
//         return squareplus(in[0], static_cast<float>(c.option("b")));
//       },
//       {{"plain", {{2, 3}}, {}, {{"b", 4.0}}}, {"small b, 3-d", {{2, 2, 3}}, {}, {{"b", 0.5}}}});
//
// A case says which situation it covers (its variant), the shapes of the random inputs the
// function receives (N(shift, scale^2) leaves, drawn from the case's seed, all checked), the
// dims and named numbers the function reads, and the finite-difference step. Register several
// per op: the shapes, dims and options where its backward could go wrong (size-1 dims,
// broadcasting, a negative dim, each branch of an option).

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "autograd/gradcheck.h"
#include "autograd/var.h"

namespace headlab {

struct OpCase {
  // {variant, inputs}, optionally followed by dims, options, scale, shift and eps, in this order.
  OpCase(std::string variant, std::vector<Shape> inputs, std::vector<int> dims = {},
         std::map<std::string, double> options = {}, float scale = 1.0f, float shift = 0.0f,
         double eps = GradcheckOptions{}.eps)
      : variant(std::move(variant)),
        inputs(std::move(inputs)),
        dims(std::move(dims)),
        options(std::move(options)),
        scale(scale),
        shift(shift),
        eps(eps) {}

  std::string variant;                    // "dim -1, keepdim", "[B,T,1] over [B,T,D]"
  std::vector<Shape> inputs;              // one random leaf per shape, in this order
  std::vector<int> dims;                  // dims the function works along (may be empty)
  std::map<std::string, double> options;  // named numbers the function reads ("b" = 4)
  float scale;                            // inputs are N(shift, scale^2)
  float shift;
  double eps;  // the step (gradcheck.h says when to widen it)

  // options[key], or throws naming the case and the key when the case has none.
  double option(std::string_view key) const;
};

// Computes the op from the case's random inputs (every one requires a gradient) and the case.
using OpFunction = std::function<Var(std::span<const Var> inputs, const OpCase& c)>;

// Adds an op under `name`. Throws if the name is empty, is a built-in op's
// (differentiable_op_names) or already registered, the function is empty, there is no case, a
// case has no variant or no input, or two cases share a variant.
void register_op(std::string name, OpFunction function, std::vector<OpCase> cases);
// Removes an op that register_op added (the plugin loader undoes a failed plugin with it); an
// unknown name is a no-op.
void unregister_op(std::string_view name);
bool has_op(std::string_view name);
// Every registered name, sorted.
std::vector<std::string> registered_ops();

// The gradcheck case of one registered op's case (kind "op"): draws the inputs from the seed,
// runs gradcheck on the function against all of them.
GradcheckCase op_gradcheck_case(const std::string& name, const OpFunction& function,
                                const OpCase& c);
// Every registered op's cases, by name, then in registration order.
std::vector<GradcheckCase> registered_op_gradcheck_cases();

}  // namespace headlab
