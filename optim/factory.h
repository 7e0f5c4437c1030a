#pragma once
// Optimizers and schedules from plain option structs, which the trainer's config loader fills
// from the [optim] and [schedule] tables; the defaults here are the config's defaults.

#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "layers/module.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"

namespace headlab {

// [optim]
struct OptimizerOptions {
  std::string name = "adam";                // "adam" | "adamw" | "sgd"
  double lr = 1e-3;                         // the base (peak) learning rate; schedules scale it
  std::array<double, 2> betas{0.9, 0.999};  // adam, adamw
  double eps = 1e-8;                        // adam, adamw
  double weight_decay = 0.0;                // adam: L2 on the gradient; adamw: decoupled; sgd: L2
  double momentum = 0.0;                    // sgd only
  bool nesterov = false;                    // sgd only; needs momentum > 0
  double clip_norm = 0.0;                   // global gradient-norm clip for the trainer; 0 = off
};

// [schedule]
struct ScheduleOptions {
  std::string name = "constant";  // "constant" | "warmup_inverse_sqrt" | "warmup_cosine"
  int64_t warmup_steps = 0;
  double min_lr = 0.0;      // warmup_cosine: the floor reached at total_steps
  int64_t total_steps = 0;  // warmup_cosine: 0 until the trainer sets it to the run's length
  int64_t d_model = 0;      // warmup_inverse_sqrt: 0 peaks at lr; > 0 is the paper's formula
};

// The optimizer named by options.name over params. Throws headlab::Error: an unknown name
// (listing the known ones), sgd-only options given to adam/adamw (momentum, nesterov), a
// negative or non-finite clip_norm, and everything the optimizer's constructor throws.
std::unique_ptr<Optimizer> make_optimizer(const OptimizerOptions& options, NamedParameters params);

// The schedule named by options.name with base learning rate lr (the [optim] lr). Throws
// headlab::Error for an unknown name (listing the known ones) and what the Schedule factory
// functions throw (see schedule.h).
Schedule make_schedule(const ScheduleOptions& options, double lr);

}  // namespace headlab
