#pragma once
// The optimizer registry: names beyond the built-ins ("adam", "adamw", "sgd") that
// make_optimizer (optim/factory.h) builds. A factory gets the [optim] options (lr,
// weight_decay, betas, eps, ... as OptimizerOptions) and the parameters, and returns its
// optimizer; its per-parameter state goes through Optimizer::state_dict()/load_state_dict(),
// so checkpoints save and resume it like the built-ins'.
//
//     headlab::register_optimizer("lion", [](const headlab::OptimizerOptions& o,
//                                            headlab::NamedParameters params) {
//       return std::make_unique<Lion>(std::move(params), o.lr, o.betas, o.weight_decay);
//     });
//
// A registration may declare the optimizer's own options, the [optim.options] table (checked
// by the config like a layer's options, then read by the factory from o.options with
// option_real and its siblings, optim/declared_options.h), and how many state tensors it keeps
// per parameter (Lion 1, Adam 2), which the memory estimate counts and make_optimizer checks
// against the built optimizer's state_names(). The config's optim.name takes any registered
// name; a plugin registers through its entry point (registry.add_optimizer,
// train/plugins/plugin.h).

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "optim/declared_options.h"
#include "optim/factory.h"

namespace headlab {

using OptimizerFactory =
    std::function<std::unique_ptr<Optimizer>(const OptimizerOptions&, NamedParameters)>;

// The state count of an optimizer registered without one: the memory estimate then counts 2
// (Adam's) and nothing is checked.
inline constexpr int kUndeclaredStateTensors = -1;

struct OptimizerDefinition {
  OptimizerFactory factory;
  int state_tensors = kUndeclaredStateTensors;  // per parameter, each of the parameter's shape
  DeclaredOptions options;                      // [optim.options]
};

// Adds `factory` under `name`, keeping `state_tensors` tensors per parameter and reading
// `options`. Throws headlab::Error if the name is empty, a built-in or already registered, the
// factory is empty, state_tensors is below kUndeclaredStateTensors or an option repeats.
void register_optimizer(std::string name, OptimizerFactory factory,
                        int state_tensors = kUndeclaredStateTensors, DeclaredOptions options = {});
// Removes a name register_optimizer added. Throws for a built-in; an unknown name is a no-op.
void unregister_optimizer(std::string_view name);

bool has_optimizer(std::string_view name);
// The built-ins and every registered name, sorted.
std::vector<std::string> registered_optimizers();
// The factory registered under `name`, or null (also for the built-ins, which the factory
// builds itself).
const OptimizerFactory* find_optimizer_factory(std::string_view name);
// The registration under `name` (a copy), or an empty factory for a built-in or unknown name.
OptimizerDefinition find_optimizer(std::string_view name);

// The options `name` declares for [optim.options]: none for the built-ins (theirs are the
// [optim] keys betas, eps, momentum and nesterov). Throws the unknown-name error of
// make_optimizer for a name not registered.
DeclaredOptions optimizer_declared_options(std::string_view name);
// State tensors per parameter of the optimizer `options` describes: adam and adamw 2, sgd 1
// with momentum and 0 without, a registered one what it declared (2 if it declared none).
// Throws as above.
int optimizer_state_tensors(const OptimizerOptions& options);
// "optimizer: name is \"x\" but expected one of: adam, adamw, sgd, ..."
[[noreturn]] void fail_unknown_optimizer(std::string_view name);

}  // namespace headlab
