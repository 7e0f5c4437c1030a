#pragma once
// Optimizer: the base of Adam, AdamW and SGD, over a model's named parameters.
//
// Per-parameter state (Adam's moments, SGD's momentum buffer) is keyed by parameter name, so it
// survives reordering and is saved in checkpoints. A training step is:
//
//   optimizer.set_lr(schedule.lr_at(optimizer.step_count() + 1));  // schedule: pure in step
//   double norm = clip_grad_norm(optimizer.parameters(), clip_norm);
//   optimizer.step();                                                // step_count() += 1
//   optimizer.zero_grad();
//
// step() runs under NoGradGuard and advances the step counter once (never once per tensor).
// A parameter whose gradient is undefined (none ever arrived) is skipped: its value and state
// are left untouched, as PyTorch skips parameters whose .grad is None. Bias corrections use the
// global step count (PyTorch counts per parameter; the two agree whenever every parameter
// receives a gradient every step, which zero_grad() ensures once one has arrived, since it
// keeps the buffers).
//
// State tensors are allocated (zeroed) the first time their parameter is updated; afterwards
// step() makes no allocation. A never-allocated state equals a zero state for every update rule
// here, so state_dict() reports it as zeros.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "layers/module.h"

namespace headlab {

// One parameter's group settings (optim.no_decay and optim.lr_scale, optim/param_groups.h).
struct ParameterGroup {
  double lr_scale = 1.0;     // lr() during this parameter's update is the rate times this
  bool weight_decay = true;  // false: its update applies no weight decay (decays())
};

class Optimizer {
 public:
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;
  virtual ~Optimizer() = default;

  // "adam", "adamw" or "sgd"; used in error messages.
  virtual const char* name() const = 0;

  // One update of every parameter that has a gradient, with the current lr(); then
  // step_count() is one higher. Bias corrections of the update use the new count.
  void step();
  // Sets every existing gradient to zero (keeps the buffers).
  void zero_grad();

  // The current rate; inside update_parameter, times the parameter's lr_scale (so an
  // optimizer that uses lr() for its step and its decoupled decay honours the groups).
  double lr() const { return lr_ * lr_scale_; }
  // Throws headlab::Error unless lr is finite and >= 0.
  void set_lr(double lr);

  // Completed steps: 0 before the first step(). Restored by load_state_dict().
  int64_t step_count() const { return step_; }
  // Throws headlab::Error if step < 0.
  void set_step_count(int64_t step);

  const NamedParameters& parameters() const { return params_; }
  // One entry per parameter, in parameters() order; all defaults until set. Throws
  // headlab::Error unless there is one per parameter and each lr_scale is finite and >= 0.
  void set_parameter_groups(std::vector<ParameterGroup> groups);
  const std::vector<ParameterGroup>& parameter_groups() const { return groups_; }
  // Names of the per-parameter state slots, e.g. {"exp_avg", "exp_avg_sq"}.
  const std::vector<std::string>& state_names() const { return state_names_; }

  // Sharding (ZeRO-1, train/distributed/shard.h): which parameters this optimizer updates and
  // keeps state for, one flag per parameter (all, until set). step() leaves the others alone
  // (their owner updates them and sends the new values), their state is released now and never
  // allocated, state_dict() reports it as zeros and load_state_dict() keeps only the owned
  // parameters' (a dict may then omit the others'). Throws headlab::Error unless there is one
  // flag per parameter.
  void set_owned(std::vector<bool> owned);
  bool owns(size_t i) const { return owned_[i]; }
  // Bytes of state tensors this optimizer holds now (allocated slots only).
  int64_t state_bytes() const;
  // Whether an update of parameter i reads nothing but that parameter's value, gradient and
  // state, the step count and the rates (begin_step may read every gradient: every rank has
  // them all), so that ranks updating disjoint parameters together make the one-process update.
  // Sharding refuses an optimizer that says false. The built-ins say true; a registered
  // optimizer says false unless it overrides this.
  virtual bool updates_per_parameter() const { return false; }

  // The state as named tensors: for every slot and parameter, in parameter order,
  // "<slot>.<param name>" ([param shape]; aliases the live state once allocated, zeros before),
  // then "step": a [2] tensor {step / 2^24, step % 2^24} (both integers, exact in fp32, so any
  // step below 2^48 round-trips through a tensors-only file). Use step_from_tensor() to read it.
  StateDict state_dict() const;
  // Copies state in by name. Collects every missing, unexpected or mis-shaped name (and a bad
  // "step" tensor), then throws one headlab::Error listing them all; nothing is modified then.
  // Moments saved under attention's older names (w_q, w_k, w_v) are stacked first, as the
  // model's are (layers/qkv_state.h).
  void load_state_dict(const StateDict& state);

  // The "step" tensor encoding described at state_dict(), and back. step_from_tensor throws
  // headlab::Error (naming `what`) unless t is [2] holding two non-negative integers, the
  // second below 2^24.
  static Tensor step_to_tensor(int64_t step);
  static int64_t step_from_tensor(const Tensor& t, const char* what = "step");
  // Throws headlab::Error naming `who` unless lr is finite and >= 0.
  static void check_lr(const char* who, double lr);

 protected:
  // Throws headlab::Error if params is empty, holds an undefined Var, a repeated name, or the
  // same Var under two names (it would be updated twice).
  Optimizer(NamedParameters params, double lr, std::vector<std::string> state_names);

  // Called once per step() after the counter advanced, before any update_parameter: compute
  // per-step scalars (bias corrections) here.
  virtual void begin_step() {}
  // Updates one parameter in place: value and grad are [same shape], contiguous; state holds
  // state_names().size() tensors of that shape, zero before the parameter's first update.
  // An optimizer with weight decay applies none where decays() is false (optim.no_decay).
  virtual void update_parameter(Tensor& value, const Tensor& grad, std::span<Tensor> state) = 0;
  // Inside update_parameter: whether the parameter being updated takes weight decay.
  bool decays() const { return decays_; }

 private:
  NamedParameters params_;
  std::vector<std::string> state_names_;
  // state_[i][k]: slot k of parameter i, undefined until first needed.
  std::vector<std::vector<Tensor>> state_;
  std::vector<ParameterGroup> groups_;
  std::vector<bool> owned_;  // set_owned
  double lr_;
  // The group of the parameter being updated; 1 and true outside update_parameter.
  double lr_scale_ = 1.0;
  bool decays_ = true;
  int64_t step_ = 0;
};

}  // namespace headlab
