#include "optim/sgd.h"

#include <cmath>

#include "core/error.h"

namespace headlab {

namespace {

// Validates the options before the base class takes the parameters; returns them.
NamedParameters checked(const SgdOptions& o, NamedParameters params) {
  Optimizer::check_lr("sgd", o.lr);
  if (!std::isfinite(o.momentum) || o.momentum < 0.0)
    fail("sgd: momentum is {} but expected finite and >= 0", o.momentum);
  if (!std::isfinite(o.weight_decay) || o.weight_decay < 0.0)
    fail("sgd: weight_decay is {} but expected finite and >= 0", o.weight_decay);
  if (o.nesterov && o.momentum <= 0.0)
    fail("sgd: nesterov needs momentum > 0 but momentum is {}", o.momentum);
  return params;
}

std::vector<std::string> slots(const SgdOptions& o) {
  if (o.momentum > 0.0) return {"momentum_buffer"};
  return {};
}

}  // namespace

Sgd::Sgd(NamedParameters params, const SgdOptions& options)
    : Optimizer(checked(options, std::move(params)), options.lr, slots(options)),
      options_(options) {}

void Sgd::update_parameter(Tensor& value, const Tensor& grad, std::span<Tensor> state) {
  // The three variants are separate loops so that none branches per element. Adding wd * p
  // with wd = 0 leaves finite gradients unchanged, as in Adam.
  const float rate = static_cast<float>(lr());
  const float wd = decays() ? static_cast<float>(options_.weight_decay) : 0.0f;
  float* __restrict p = value.data();
  const float* __restrict g = grad.data();
  const int64_t n = value.numel();
  if (state.empty()) {
    for (int64_t i = 0; i < n; ++i) p[i] -= rate * (g[i] + wd * p[i]);
    return;
  }
  const float mu = static_cast<float>(options_.momentum);
  float* __restrict b = state[0].data();
  if (options_.nesterov) {
    for (int64_t i = 0; i < n; ++i) {
      const float d = g[i] + wd * p[i];
      const float bi = mu * b[i] + d;
      b[i] = bi;
      p[i] -= rate * (d + mu * bi);
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      const float bi = mu * b[i] + (g[i] + wd * p[i]);
      b[i] = bi;
      p[i] -= rate * bi;
    }
  }
}

}  // namespace headlab
