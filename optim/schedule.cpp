#include "optim/schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/error.h"

namespace headlab {

namespace {

void check_lr(const char* who, double lr, bool allow_zero) {
  if (!std::isfinite(lr) || lr < 0.0 || (!allow_zero && lr == 0.0))
    fail("{}: lr is {} but expected finite and {}", who, lr, allow_zero ? ">= 0" : "> 0");
}

void check_warmup(const char* who, int64_t warmup, int64_t minimum) {
  if (warmup < minimum) fail("{}: warmup_steps is {} but expected >= {}", who, warmup, minimum);
}

const char* kind_name(Schedule::Kind kind) {
  switch (kind) {
    case Schedule::Kind::kConstant:
      return "constant";
    case Schedule::Kind::kWarmupInverseSqrt:
      return "warmup_inverse_sqrt";
    case Schedule::Kind::kWarmupCosine:
      return "warmup_cosine";
    case Schedule::Kind::kCustom:
      break;
  }
  return "custom";
}

}  // namespace

Schedule::Schedule(Kind kind, double lr, int64_t warmup, int64_t total, double min_lr,
                   int64_t d_model)
    : kind_(kind),
      lr_(lr),
      warmup_(warmup),
      total_(total),
      min_lr_(min_lr),
      d_model_(d_model),
      name_(kind_name(kind)) {}

Schedule Schedule::custom(std::string name, Function lr_of_step, int64_t warmup_steps) {
  if (!lr_of_step) fail("schedule {}: the function is empty", name);
  Schedule s(Kind::kCustom, 0.0, warmup_steps, 0, 0.0, 0);
  s.name_ = std::move(name);
  s.custom_ = std::move(lr_of_step);
  return s;
}

Schedule Schedule::constant(double lr, int64_t warmup_steps) {
  check_lr("schedule constant", lr, true);
  check_warmup("schedule constant", warmup_steps, 0);
  return Schedule(Kind::kConstant, lr, warmup_steps, 0, 0.0, 0);
}

Schedule Schedule::warmup_inverse_sqrt(double lr, int64_t warmup_steps, int64_t d_model) {
  const char* who = "schedule warmup_inverse_sqrt";
  check_lr(who, lr, false);
  check_warmup(who, warmup_steps, 1);
  if (d_model < 0) fail("{}: d_model is {} but expected >= 0 (0: peak lr = lr)", who, d_model);
  return Schedule(Kind::kWarmupInverseSqrt, lr, warmup_steps, 0, 0.0, d_model);
}

Schedule Schedule::warmup_cosine(double lr, int64_t warmup_steps, int64_t total_steps,
                                 double min_lr) {
  const char* who = "schedule warmup_cosine";
  check_lr(who, lr, false);
  check_warmup(who, warmup_steps, 0);
  if (total_steps <= warmup_steps)
    fail("{}: total_steps is {} but expected > warmup_steps = {}", who, total_steps, warmup_steps);
  if (!std::isfinite(min_lr) || min_lr < 0.0 || min_lr > lr)
    fail("{}: min_lr is {} but expected in [0, lr = {}]", who, min_lr, lr);
  return Schedule(Kind::kWarmupCosine, lr, warmup_steps, total_steps, min_lr, 0);
}

double Schedule::lr_at(int64_t step) const {
  if (step < 1) fail("schedule: step is {} but expected >= 1 (steps count from 1)", step);
  const double s = static_cast<double>(step);
  const double w = static_cast<double>(warmup_);
  switch (kind_) {
    case Kind::kConstant:
      return step < warmup_ ? lr_ * s / w : lr_;
    case Kind::kWarmupInverseSqrt: {
      // min(s^-0.5, s * w^-1.5): the two branches meet at s = w with value w^-0.5.
      const double shape = std::min(1.0 / std::sqrt(s), s / (w * std::sqrt(w)));
      if (d_model_ > 0) return lr_ * shape / std::sqrt(static_cast<double>(d_model_));
      return lr_ * shape * std::sqrt(w);
    }
    case Kind::kWarmupCosine: {
      if (step <= warmup_) return lr_ * s / w;
      if (step >= total_) return min_lr_;
      const double progress = (s - w) / static_cast<double>(total_ - warmup_);
      return min_lr_ + (lr_ - min_lr_) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
    }
    case Kind::kCustom: {
      const double lr = custom_(step);
      if (!std::isfinite(lr) || lr < 0.0)
        fail("schedule {}: the learning rate of step {} is {} but expected finite and >= 0", name_,
             step, lr);
      return lr;
    }
  }
  HEADLAB_ASSERT(false);
  return 0.0;
}

}  // namespace headlab
