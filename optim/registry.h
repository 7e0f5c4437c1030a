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
// Not yet: the config's optim.name key still accepts only the built-in names, and there is
// no schedule registry nor per-optimizer options table (issue 24).

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "optim/factory.h"

namespace headlab {

using OptimizerFactory =
    std::function<std::unique_ptr<Optimizer>(const OptimizerOptions&, NamedParameters)>;

// Adds `factory` under `name`. Throws headlab::Error if the name is empty, a built-in or
// already registered, or the factory is empty.
void register_optimizer(std::string name, OptimizerFactory factory);
// Removes a name register_optimizer added. Throws for a built-in; an unknown name is a no-op.
void unregister_optimizer(std::string_view name);

bool has_optimizer(std::string_view name);
// The built-ins and every registered name, sorted.
std::vector<std::string> registered_optimizers();
// The factory registered under `name`, or null (also for the built-ins, which the factory
// builds itself).
const OptimizerFactory* find_optimizer_factory(std::string_view name);

}  // namespace headlab
