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

#include <cstdint>

namespace headlab {

class Schedule {
 public:
  enum class Kind { kConstant, kWarmupInverseSqrt, kWarmupCosine };

  // Each throws headlab::Error naming the argument unless: lr finite and > 0 (constant: >= 0);
  // warmup_steps >= 0 (inverse sqrt: >= 1); total_steps > warmup_steps; 0 <= min_lr <= lr;
  // d_model >= 0.
  static Schedule constant(double lr, int64_t warmup_steps = 0);
  static Schedule warmup_inverse_sqrt(double lr, int64_t warmup_steps, int64_t d_model = 0);
  static Schedule warmup_cosine(double lr, int64_t warmup_steps, int64_t total_steps,
                                double min_lr = 0.0);

  // The learning rate of update number `step` (>= 1; throws headlab::Error otherwise).
  double lr_at(int64_t step) const;

  Kind kind() const { return kind_; }
  int64_t warmup_steps() const { return warmup_; }

 private:
  Schedule(Kind kind, double lr, int64_t warmup, int64_t total, double min_lr, int64_t d_model)
      : kind_(kind), lr_(lr), warmup_(warmup), total_(total), min_lr_(min_lr), d_model_(d_model) {}

  Kind kind_;
  double lr_;
  int64_t warmup_;
  int64_t total_;
  double min_lr_;
  int64_t d_model_;
};

}  // namespace headlab
