#include "optim/adam.h"

#include <cmath>

#include <omp.h>

#include "core/error.h"

namespace headlab {

namespace {

// Validates the options before the base class takes the parameters; returns them.
NamedParameters checked(const char* who, const AdamOptions& o, NamedParameters params) {
  Optimizer::check_lr(who, o.lr);
  if (!(o.beta1 >= 0.0 && o.beta1 < 1.0))
    fail("{}: beta1 is {} but expected in [0, 1)", who, o.beta1);
  if (!(o.beta2 >= 0.0 && o.beta2 < 1.0))
    fail("{}: beta2 is {} but expected in [0, 1)", who, o.beta2);
  if (!std::isfinite(o.eps) || o.eps < 0.0)
    fail("{}: eps is {} but expected finite and >= 0", who, o.eps);
  if (!std::isfinite(o.weight_decay) || o.weight_decay < 0.0)
    fail("{}: weight_decay is {} but expected finite and >= 0", who, o.weight_decay);
  return params;
}

}  // namespace

Adam::Adam(NamedParameters params, const AdamOptions& options)
    : Adam(std::move(params), options, false) {}

Adam::Adam(NamedParameters params, const AdamOptions& options, bool decoupled)
    : Optimizer(checked(decoupled ? "adamw" : "adam", options, std::move(params)), options.lr,
                {"exp_avg", "exp_avg_sq"}),
      options_(options),
      decoupled_(decoupled) {}

AdamW::AdamW(NamedParameters params, const AdamOptions& options)
    : Adam(std::move(params), options, true) {}

void Adam::begin_step() {
  const double t = static_cast<double>(step_count());
  step_size_ = lr() / (1.0 - std::pow(options_.beta1, t));
  bias_correction2_sqrt_ = std::sqrt(1.0 - std::pow(options_.beta2, t));
}

void Adam::update_parameter(Tensor& value, const Tensor& grad, std::span<Tensor> state) {
  // Scalars are rounded to float once, as PyTorch passes them to its float kernels. Both weight
  // decay forms run in the same loop: Adam has decay = 1 and l2 = wd, AdamW decay = 1 - lr*wd
  // and l2 = 0; multiplying by 1 and adding 0 * p leave finite values unchanged bit for bit.
  const double wd = options_.weight_decay;
  const float decay = decoupled_ ? static_cast<float>(1.0 - lr() * wd) : 1.0f;
  const float l2 = decoupled_ ? 0.0f : static_cast<float>(wd);
  const float beta1 = static_cast<float>(options_.beta1);
  const float beta2 = static_cast<float>(options_.beta2);
  const float one_minus_beta1 = static_cast<float>(1.0 - options_.beta1);
  const float one_minus_beta2 = static_cast<float>(1.0 - options_.beta2);
  const float step_size = static_cast<float>(step_size_);
  const float bc2_sqrt = static_cast<float>(bias_correction2_sqrt_);
  const float eps = static_cast<float>(options_.eps);

  float* __restrict p = value.data();
  const float* __restrict g = grad.data();
  float* __restrict m = state[0].data();
  float* __restrict v = state[1].data();
  const int64_t n = value.numel();
  // A large parameter is shared among the kernels' OpenMP threads; elements are independent, so
  // the result does not depend on the split.
  const int threads = n >= (int64_t{1} << 16) ? omp_get_max_threads() : 1;
#pragma omp parallel for simd num_threads(threads) if (threads > 1) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float gi = g[i] + l2 * p[i];
    const float mi = beta1 * m[i] + one_minus_beta1 * gi;
    const float vi = beta2 * v[i] + one_minus_beta2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    p[i] = p[i] * decay - step_size * mi / (std::sqrt(vi) / bc2_sqrt + eps);
  }
}

}  // namespace headlab
