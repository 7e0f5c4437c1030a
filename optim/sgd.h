#pragma once
// SGD with optional momentum (dampening 0) and Nesterov momentum, as PyTorch 1.13 computes it.
// For each element, with gradient g and weight_decay wd (L2, added to the gradient):
//
//   d <- g + wd * p
//   without momentum:   p <- p - lr * d
//   with momentum mu:   b <- mu * b + d                      state "momentum_buffer"
//                       p <- p - lr * (nesterov ? d + mu * b : b)
//
// PyTorch starts the buffer as a copy of d at the first step; with dampening 0 that equals
// mu * 0 + d, so the lazily zeroed buffer gives the same values. Without momentum there is no
// per-parameter state (state_dict() holds only "step").

#include "optim/optimizer.h"

namespace headlab {

struct SgdOptions {
  double lr = 1e-2;
  double momentum = 0.0;
  bool nesterov = false;
  double weight_decay = 0.0;
};

class Sgd : public Optimizer {
 public:
  // Throws headlab::Error naming the option unless lr, momentum and weight_decay are finite and
  // >= 0, and nesterov comes with momentum > 0; and as Optimizer's constructor.
  Sgd(NamedParameters params, const SgdOptions& options = {});
  const char* name() const override { return "sgd"; }
  bool updates_per_parameter() const override { return true; }
  // As constructed; options().lr is the initial rate, lr() the current one.
  const SgdOptions& options() const { return options_; }

 protected:
  void update_parameter(Tensor& value, const Tensor& grad, std::span<Tensor> state) override;

 private:
  SgdOptions options_;
};

}  // namespace headlab
