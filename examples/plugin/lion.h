#pragma once
// Lion (Chen et al. 2023, "Symbolic Discovery of Optimization Algorithms", Algorithm 2): the
// sign of an interpolated momentum, with decoupled weight decay. Per element, with gradient g:
//   c <- beta1 * m + (1 - beta1) * g
//   p <- p * (1 - lr * wd) - lr * sign(c)
//   m <- beta2 * m + (1 - beta2) * g                 state "exp_avg" (one tensor per parameter)
// Registered as "lion": [optim] name = "lion", its betas in [optim.options] (beta1 = 0.9,
// beta2 = 0.99), lr and weight_decay the [optim] keys. Its updates have unit size per element,
// so it wants a learning rate 3-10x below Adam's.

#include <headlab/optim/declared_options.h>
#include <headlab/optim/factory.h>
#include <headlab/optim/optimizer.h>

namespace example {

class Lion : public headlab::Optimizer {
 public:
  Lion(headlab::NamedParameters params, double lr, double beta1, double beta2, double wd);
  const char* name() const override { return "lion"; }
  // Each update reads its own parameter alone: runtime.shard_optimizer may shard its state.
  bool updates_per_parameter() const override { return true; }

 protected:
  void update_parameter(headlab::Tensor& value, const headlab::Tensor& grad,
                        std::span<headlab::Tensor> state) override;

 private:
  double beta1_, beta2_, weight_decay_;
};

// The [optim.options] Lion reads, and its factory for the optimizer registry.
headlab::DeclaredOptions lion_options();
std::unique_ptr<headlab::Optimizer> make_lion(const headlab::OptimizerOptions& o,
                                              headlab::NamedParameters params);

}  // namespace example
