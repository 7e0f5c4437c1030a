#include "optim/factory.h"

#include <cmath>

#include "core/error.h"
#include "optim/adam.h"
#include "optim/registry.h"
#include "optim/schedule_registry.h"
#include "optim/sgd.h"

namespace headlab {

namespace {

std::unique_ptr<Optimizer> build_optimizer(const OptimizerOptions& options,
                                           NamedParameters params) {
  const std::string& name = options.name;
  if (!std::isfinite(options.clip_norm) || options.clip_norm < 0.0)
    fail("optimizer: clip_norm is {} but expected finite and >= 0 (0 turns clipping off)",
         options.clip_norm);
  if (name != "sgd" && (options.momentum != 0.0 || options.nesterov))
    fail("optimizer: momentum and nesterov apply to sgd only, but the optimizer is \"{}\"", name);
  if (name == "adam" || name == "adamw" || name == "sgd")
    resolve_declared_options("optim.options", {}, options.options);  // refuses any key
  if (name == "adam" || name == "adamw") {
    const AdamOptions adam{.lr = options.lr,
                           .beta1 = options.betas[0],
                           .beta2 = options.betas[1],
                           .eps = options.eps,
                           .weight_decay = options.weight_decay};
    if (name == "adam") return std::make_unique<Adam>(std::move(params), adam);
    return std::make_unique<AdamW>(std::move(params), adam);
  }
  if (name == "sgd")
    return std::make_unique<Sgd>(std::move(params),
                                 SgdOptions{.lr = options.lr,
                                            .momentum = options.momentum,
                                            .nesterov = options.nesterov,
                                            .weight_decay = options.weight_decay});
  const OptimizerDefinition definition = find_optimizer(name);
  if (!definition.factory) fail_unknown_optimizer(name);
  OptimizerOptions resolved = options;
  resolved.options = resolve_declared_options("optim.options", definition.options, options.options);
  std::unique_ptr<Optimizer> optimizer = definition.factory(resolved, std::move(params));
  if (!optimizer) fail("optimizer: the factory registered as \"{}\" returned null", name);
  if (definition.state_tensors != kUndeclaredStateTensors &&
      optimizer->state_names().size() != static_cast<size_t>(definition.state_tensors))
    fail("optimizer: \"{}\" was registered with {} state tensors per parameter but keeps {}", name,
         definition.state_tensors, optimizer->state_names().size());
  return optimizer;
}

}  // namespace

std::unique_ptr<Optimizer> make_optimizer(const OptimizerOptions& options, NamedParameters params) {
  std::unique_ptr<Optimizer> optimizer = build_optimizer(options, std::move(params));
  if (!options.no_decay.empty() || !options.lr_scale.empty())
    optimizer->set_parameter_groups(
        parameter_groups(optimizer->parameters(), options.no_decay, options.lr_scale));
  return optimizer;
}

Schedule make_schedule(const ScheduleOptions& options, double lr) {
  const ScheduleDefinition definition = find_schedule(options.name);
  ScheduleOptions resolved = options;
  resolved.options =
      resolve_declared_options("schedule.options", definition.options, options.options);
  return definition.factory(resolved, lr);
}

}  // namespace headlab
