#include "optim/factory.h"

#include <cmath>

#include "core/error.h"
#include "optim/adam.h"
#include "optim/registry.h"
#include "optim/sgd.h"

namespace headlab {

std::unique_ptr<Optimizer> make_optimizer(const OptimizerOptions& options, NamedParameters params) {
  const std::string& name = options.name;
  if (!std::isfinite(options.clip_norm) || options.clip_norm < 0.0)
    fail("optimizer: clip_norm is {} but expected finite and >= 0 (0 turns clipping off)",
         options.clip_norm);
  if (name == "adam" || name == "adamw") {
    if (options.momentum != 0.0 || options.nesterov)
      fail("optimizer: momentum and nesterov apply to sgd only, but the optimizer is \"{}\"", name);
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
  if (const OptimizerFactory* factory = find_optimizer_factory(name)) {
    if (options.momentum != 0.0 || options.nesterov)
      fail("optimizer: momentum and nesterov apply to sgd only, but the optimizer is \"{}\"", name);
    std::unique_ptr<Optimizer> optimizer = (*factory)(options, std::move(params));
    if (!optimizer) fail("optimizer: the factory registered as \"{}\" returned null", name);
    return optimizer;
  }
  std::string known;
  for (const std::string& n : registered_optimizers()) known += (known.empty() ? "" : ", ") + n;
  fail("optimizer: name is \"{}\" but expected one of: {}", name, known);
}

Schedule make_schedule(const ScheduleOptions& options, double lr) {
  const std::string& name = options.name;
  if (name == "constant") return Schedule::constant(lr, options.warmup_steps);
  if (name == "warmup_inverse_sqrt")
    return Schedule::warmup_inverse_sqrt(lr, options.warmup_steps, options.d_model);
  if (name == "warmup_cosine")
    return Schedule::warmup_cosine(lr, options.warmup_steps, options.total_steps, options.min_lr);
  fail("schedule: name is \"{}\" but expected one of: constant, warmup_inverse_sqrt, warmup_cosine",
       name);
}

}  // namespace headlab
