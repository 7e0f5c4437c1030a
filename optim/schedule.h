#pragma once
// Learning-rate schedules: pure functions of the step, so resuming needs no schedule state.
//
// Step numbering: lr_at(s) is the learning rate of the s-th update, s = 1, 2, ..., i.e.
// lr_at(optimizer.step_count() + 1) just before optimizer.step(). So step 1 has a non-zero
// warmup rate, the warmup peak is reached at s = warmup_steps, and the cosine reaches min_lr at
// s = total_steps (the last step of a run of total_steps updates). With base lr L, warmup W,
// total N:
//
//   constant:             s < W: L * s / W;          else L            (W = 0: always L)
//   warmup_inverse_sqrt:  L * min(s^-0.5, s * W^-1.5) / W^-0.5 = L * min(sqrt(W / s), s / W)
//                         i.e. the Transformer paper's d_model^-0.5 * min(s^-0.5, s * W^-1.5)
//                         rescaled so its peak (at s = W) is L. With d_model > 0 it is the
//                         paper's formula literally, times L as a factor:
//                         L * d_model^-0.5 * min(s^-0.5, s * W^-1.5) (paper: L = 1).
//   warmup_cosine:        s <= W: L * s / W;
//                         W < s <= N: min_lr + (L - min_lr) * (1 + cos(pi * (s - W) / (N - W))) / 2
//                         s > N: min_lr
//
// Where W = 0 the warmup branch is absent (cosine starts at s = 0, so step 1 is just below L).
//
// Other schedules (a plugin's, through the schedule registry, optim/schedule_registry.h) are
// Schedule::custom: any pure function of the step, so resuming needs no schedule state either.

#include <cstdint>
#include <functional>
#include <string>

namespace headlab {

class Schedule {
 public:
  // kCustom: a Schedule::custom.
  enum class Kind { kConstant, kWarmupInverseSqrt, kWarmupCosine, kCustom };
  // The learning rate of update number step >= 1. Must be pure (the same value for the same
  // step, whatever was asked before): a resumed run asks from the resumed step on.
  using Function = std::function<double(int64_t step)>;

  // Each throws headlab::Error naming the argument unless: lr finite and > 0 (constant: >= 0);
  // warmup_steps >= 0 (inverse sqrt: >= 1); total_steps > warmup_steps; 0 <= min_lr <= lr;
  // d_model >= 0.
  static Schedule constant(double lr, int64_t warmup_steps = 0);
  static Schedule warmup_inverse_sqrt(double lr, int64_t warmup_steps, int64_t d_model = 0);
  static Schedule warmup_cosine(double lr, int64_t warmup_steps, int64_t total_steps,
                                double min_lr = 0.0);
  // A schedule named `name` (in error messages) computing lr_at(s) = lr_of_step(s); lr_at
  // throws headlab::Error naming it when the function returns a negative or non-finite rate.
  // `warmup_steps` is informational (warmup_steps()). Throws if the function is empty.
  static Schedule custom(std::string name, Function lr_of_step, int64_t warmup_steps = 0);

  // The learning rate of update number `step` (>= 1; throws headlab::Error otherwise).
  double lr_at(int64_t step) const;

  Kind kind() const { return kind_; }
  int64_t warmup_steps() const { return warmup_; }
  // "constant", "warmup_inverse_sqrt", "warmup_cosine", or the custom schedule's name.
  const std::string& name() const { return name_; }

 private:
  Schedule(Kind kind, double lr, int64_t warmup, int64_t total, double min_lr, int64_t d_model);

  Kind kind_;
  double lr_;
  int64_t warmup_;
  int64_t total_;
  double min_lr_;
  int64_t d_model_;
  std::string name_;
  Function custom_;  // kCustom only
};

}  // namespace headlab
