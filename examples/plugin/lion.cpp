#include "lion.h"

namespace example {

using headlab::OptionSpec;

Lion::Lion(headlab::NamedParameters params, double lr, double beta1, double beta2, double wd)
    : Optimizer(std::move(params), lr, {"exp_avg"}),
      beta1_(beta1),
      beta2_(beta2),
      weight_decay_(wd) {}

void Lion::update_parameter(headlab::Tensor& value, const headlab::Tensor& grad,
                            std::span<headlab::Tensor> state) {
  // lr() is this parameter's (optim.lr_scale applied); decays() is false under optim.no_decay.
  const float rate = static_cast<float>(lr());
  const float decay = static_cast<float>(1.0 - lr() * (decays() ? weight_decay_ : 0.0));
  const float b1 = static_cast<float>(beta1_), b2 = static_cast<float>(beta2_);
  float* p = value.data();
  const float* g = grad.data();
  float* m = state[0].data();
  for (int64_t i = 0; i < value.numel(); ++i) {
    const float c = b1 * m[i] + (1.0f - b1) * g[i];
    const float sign = c > 0.0f ? 1.0f : c < 0.0f ? -1.0f : 0.0f;
    p[i] = p[i] * decay - rate * sign;
    m[i] = b2 * m[i] + (1.0f - b2) * g[i];
  }
}

headlab::DeclaredOptions lion_options() {
  return {
      {"beta1", OptionSpec::real(0, 1, false, true).documented("Interpolation of the update."),
       0.9},
      {"beta2", OptionSpec::real(0, 1, false, true).documented("Decay of the momentum."), 0.99}};
}

std::unique_ptr<headlab::Optimizer> make_lion(const headlab::OptimizerOptions& o,
                                              headlab::NamedParameters params) {
  return std::make_unique<Lion>(std::move(params), o.lr, headlab::option_real(o.options, "beta1"),
                                headlab::option_real(o.options, "beta2"), o.weight_decay);
}

}  // namespace example
