#pragma once
// Adam (Kingma & Ba, 2015, Algorithm 1) and AdamW (Loshchilov & Hutter, 2019), as PyTorch 1.13
// computes them. For step t (the count after this step) and each element, with gradient g:
//
//   Adam  with weight_decay wd (L2, coupled):  g <- g + wd * p
//   AdamW with weight_decay wd (decoupled):    p <- p * (1 - lr * wd)   (before the update)
//   m <- beta1 * m + (1 - beta1) * g                       state "exp_avg"
//   v <- beta2 * v + (1 - beta2) * g^2                     state "exp_avg_sq"
//   p <- p - (lr / (1 - beta1^t)) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
//
// i.e. p -= lr * m_hat / (sqrt(v_hat) + eps) with eps added after the square root of the
// bias-corrected second moment. AdamW multiplies the decay by lr as PyTorch does (the paper's
// schedule multiplier eta_t is lr here). Defaults are PyTorch's: betas (0.9, 0.999), eps 1e-8,
// weight_decay 0 (also for AdamW, where PyTorch's default is 1e-2: AdamW with 0 equals Adam).
// The per-element loop is branch-free float arithmetic over contiguous buffers; scalars that
// depend on t are computed once per step in double.

#include "optim/optimizer.h"

namespace headlab {

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
};

class Adam : public Optimizer {
 public:
  // Throws headlab::Error naming the option unless lr is finite and >= 0, betas lie in
  // [0, 1), eps and weight_decay are finite and >= 0; and as Optimizer's constructor.
  Adam(NamedParameters params, const AdamOptions& options = {});
  const char* name() const override { return decoupled_ ? "adamw" : "adam"; }
  bool updates_per_parameter() const override { return true; }
  // As constructed; options().lr is the initial rate, lr() the current one.
  const AdamOptions& options() const { return options_; }

 protected:
  Adam(NamedParameters params, const AdamOptions& options, bool decoupled);
  void begin_step() override;
  void update_parameter(Tensor& value, const Tensor& grad, std::span<Tensor> state) override;

 private:
  AdamOptions options_;
  bool decoupled_;
  // Per-step scalars set by begin_step().
  double bias_correction1_ = 1.0;       // 1 - beta1^t (the step size is lr() / this)
  double bias_correction2_sqrt_ = 1.0;  // sqrt(1 - beta2^t)
};

// Adam with decoupled weight decay; same options and validation.
class AdamW : public Adam {
 public:
  AdamW(NamedParameters params, const AdamOptions& options = {});
};

}  // namespace headlab
