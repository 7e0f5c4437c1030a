#pragma once
// Optimizers and schedules from plain option structs. The config's [optim] and [schedule] tables
// are these structs (Config::optim, Config::schedule in train/config/config.h), so their member
// initialisers are the config's defaults, written once: Adam with the Transformer paper's betas
// (0.9, 0.98), the flagship's learning rate, gradient clipping at norm 1, and a cosine decay
// after 100 warmup steps.

#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "layers/module.h"
#include "layers/options.h"
#include "optim/optimizer.h"
#include "optim/param_groups.h"
#include "optim/schedule.h"

namespace headlab {

// [optim]
struct OptimizerOptions {
  std::string name = "adam";               // "adam" | "adamw" | "sgd" | a registered name
  double lr = 3e-3;                        // the base (peak) learning rate; schedules scale it
  std::array<double, 2> betas{0.9, 0.98};  // adam, adamw
  double eps = 1e-8;                       // adam, adamw
  double weight_decay = 0.0;               // adam: L2 on the gradient; adamw: decoupled; sgd: L2
  double momentum = 0.0;                   // sgd only
  bool nesterov = false;                   // sgd only; needs momentum > 0
  // The global gradient-norm clip the training step applies before step() (clip_grad_norm,
  // optim/clip.h); 0 turns it off. Not the optimizer's own: make_optimizer checks it so that a
  // bad value fails before the first step.
  double clip_norm = 1.0;
  // Parameter groups (optim/param_groups.h): glob patterns whose parameters take no weight
  // decay, and learning-rate scales by pattern.
  std::vector<std::string> no_decay;
  std::vector<LrScale> lr_scale;
  // [optim.options]: the registered optimizer's own options (optim/registry.h); the built-ins
  // take none (theirs are the keys above).
  OptionMap options;
};

// [schedule]
struct ScheduleOptions {
  std::string name = "warmup_cosine";  // "constant" | "warmup_inverse_sqrt" | "warmup_cosine"
  int64_t warmup_steps = 100;
  double min_lr = 0.0;  // warmup_cosine: the floor reached at total_steps
  // warmup_cosine: the run's length. Not a config key: a run sets it from train.steps.
  int64_t total_steps = 0;
  int64_t d_model = 0;  // warmup_inverse_sqrt: 0 peaks at lr; > 0 is the paper's formula
  // [schedule.options]: the registered schedule's own options (optim/schedule_registry.h).
  OptionMap options;
};

// The optimizer named by options.name over params, with its parameter groups set from no_decay
// and lr_scale. Throws headlab::Error naming the option: an unknown name (listing the known
// ones), sgd-only options given to another optimizer (momentum, nesterov), a negative or
// non-finite clip_norm, an [optim.options] key the optimizer does not declare or a value out of
// its range, a pattern that matches no parameter, a registered optimizer whose state slots
// differ from the count it declared, and everything the optimizer's constructor throws. (A
// config's values are checked against its key table before, with their positions.)
std::unique_ptr<Optimizer> make_optimizer(const OptimizerOptions& options, NamedParameters params);

// The schedule named by options.name (a built-in or registered, optim/schedule_registry.h) with
// base learning rate lr (the [optim] lr). Throws headlab::Error for an unknown name (listing
// the known ones), an [schedule.options] key it does not declare or a value out of range, and
// what the Schedule factory functions throw (see schedule.h).
Schedule make_schedule(const ScheduleOptions& options, double lr);

}  // namespace headlab
