#include "optim/adam.h"

#include <cmath>

#include <omp.h>

#include "core/error.h"
#include "core/threads.h"

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

// The per-step scalars of the update, rounded to float (see update_parameter).
struct Scalars {
  float decay, l2, beta1, beta2, one_minus_beta1, one_minus_beta2, step_size, bc2_sqrt, eps;
};

// Elements [begin, end) of one parameter; restrict pointers let the loop vectorize.
void update_range(float* __restrict p, const float* __restrict g, float* __restrict m,
                  float* __restrict v, int64_t begin, int64_t end, const Scalars& s) {
  for (int64_t i = begin; i < end; ++i) {
    const float gi = g[i] + s.l2 * p[i];
    const float mi = s.beta1 * m[i] + s.one_minus_beta1 * gi;
    const float vi = s.beta2 * v[i] + s.one_minus_beta2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    p[i] = p[i] * s.decay - s.step_size * mi / (std::sqrt(vi) / s.bc2_sqrt + s.eps);
  }
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
  bias_correction1_ = 1.0 - std::pow(options_.beta1, t);
  bias_correction2_sqrt_ = std::sqrt(1.0 - std::pow(options_.beta2, t));
}

void Adam::update_parameter(Tensor& value, const Tensor& grad, std::span<Tensor> state) {
  // Scalars are rounded to float once, as PyTorch passes them to its float kernels. Both weight
  // decay forms run in the same loop: Adam has decay = 1 and l2 = wd, AdamW decay = 1 - lr*wd
  // and l2 = 0; multiplying by 1 and adding 0 * p leave finite values unchanged bit for bit.
  // lr() is this parameter's (its group's lr_scale applied), so the step size is per parameter.
  const double wd = decays() ? options_.weight_decay : 0.0;
  const float decay = decoupled_ ? static_cast<float>(1.0 - lr() * wd) : 1.0f;
  const float l2 = decoupled_ ? 0.0f : static_cast<float>(wd);
  Scalars s;
  s.decay = decay;
  s.l2 = l2;
  s.beta1 = static_cast<float>(options_.beta1);
  s.beta2 = static_cast<float>(options_.beta2);
  s.one_minus_beta1 = static_cast<float>(1.0 - options_.beta1);
  s.one_minus_beta2 = static_cast<float>(1.0 - options_.beta2);
  s.step_size = static_cast<float>(lr() / bias_correction1_);
  s.bc2_sqrt = static_cast<float>(bias_correction2_sqrt_);
  s.eps = static_cast<float>(options_.eps);

  float* p = value.data();
  const float* g = grad.data();
  float* m = state[0].data();
  float* v = state[1].data();
  const int64_t n = value.numel();
  // A large parameter is shared among the kernels' OpenMP threads when there are several; the
  // elements are independent, so the result does not depend on the split.
  const int threads = n >= (int64_t{1} << 16) ? kernel_threads() : 1;
  if (threads == 1) return update_range(p, g, m, v, 0, n, s);
#pragma omp parallel num_threads(threads)
  {
    const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    update_range(p, g, m, v, n * t / nt, n * (t + 1) / nt, s);
  }
}

}  // namespace headlab
