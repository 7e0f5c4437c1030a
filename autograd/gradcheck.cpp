#include "autograd/gradcheck.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "autograd/grad_mode.h"
#include "autograd/tape.h"
#include "core/error.h"
#include "core/rng.h"

namespace headlab {
namespace {

// L = sum_i u_i y_i in double. Checks that y kept the shape of the first evaluation.
double project(const Var& y, const Tensor& u) {
  if (!y.defined()) fail("gradcheck: f returned an undefined Var");
  if (y.shape() != u.shape())
    fail("gradcheck: f's output shape changed from {} to {} between evaluations", u.shape().str(),
         y.shape().str());
  double acc = 0.0;
  const float* yv = y.value().data();
  for (int64_t i = 0, n = y.numel(); i < n; ++i) acc += static_cast<double>(u[i]) * yv[i];
  return acc;
}

double evaluate(const std::function<Var()>& f, const Tensor& u) {
  NoGradGuard no_grad;
  return project(f(), u);
}

// The tape gradient of L = <u, f()> for each Var in wrt, in double (zeros where none arrived).
std::vector<std::vector<double>> analytic_gradients(const std::function<Var()>& f,
                                                    const std::vector<Var>& wrt, Tensor& u,
                                                    uint64_t seed) {
  // A private tape per thread: the caller's tape is untouched, and a value f keeps beyond this
  // call still points at a live tape (whose generation has moved on).
  thread_local Tape tape;
  TapeScope scope(tape);
  struct ClearOnExit {  // f may throw after recording
    Tape& tape;
    ~ClearOnExit() { tape.clear(); }
  } clear_on_exit{tape};
  for (const Var& v : wrt) v.clear_grad();
  Var y = f();
  if (!y.defined()) fail("gradcheck: f returned an undefined Var");
  u = Tensor::empty(y.shape());
  Rng rng(seed);
  for (int64_t i = 0; i < u.numel(); ++i) u[i] = rng.normal();

  std::vector<std::vector<double>> grads(wrt.size());
  if (y.tape() != nullptr) {
    y.backward(u);
  } else if (y.requires_grad()) {
    // f returned one of the leaves itself (an identity such as dropout in eval): dL/dy = u.
    y.grad() = u.clone();
  }
  for (size_t k = 0; k < wrt.size(); ++k) {
    grads[k].assign(static_cast<size_t>(wrt[k].numel()), 0.0);
    if (!wrt[k].has_grad()) continue;
    const Tensor& g = wrt[k].grad();
    for (int64_t i = 0; i < g.numel(); ++i) grads[k][i] = g[i];
  }
  return grads;
}

}  // namespace

GradcheckResult gradcheck(const std::function<Var()>& f, const std::vector<Var>& wrt,
                          const GradcheckOptions& options) {
  for (size_t k = 0; k < wrt.size(); ++k) {
    const Var& v = wrt[k];
    if (!v.defined()) fail("gradcheck: input {} is undefined", k);
    if (!v.is_leaf() || !v.requires_grad())
      fail("gradcheck: input {} (shape {}) must be a leaf with requires_grad", k, v.shape().str());
  }
  GradcheckResult result;
  result.inputs = static_cast<int>(wrt.size());
  Tensor u;
  const std::vector<std::vector<double>> analytic = analytic_gradients(f, wrt, u, options.seed);

  const double floor = options.rtol > 0 ? options.atol / options.rtol : options.atol;
  double worst = -1.0;
  for (size_t k = 0; k < wrt.size(); ++k) {
    float* x = wrt[k].value().data();
    for (int64_t i = 0, n = wrt[k].numel(); i < n; ++i) {
      const float original = x[i];
      if (!std::isfinite(original)) continue;
      struct Restore {  // also when f throws
        float* p;
        float v;
        ~Restore() { *p = v; }
      } restore{x + i, original};
      // Central differences with half-widths h and h/2, each with the step realised in fp32:
      // D(s) = f' + c s^2 + O(s^4), so (s1^2 D(s2) - s2^2 D(s1)) / (s1^2 - s2^2) cancels the s^2
      // term (Richardson extrapolation) whatever the realised s1 and s2.
      auto central = [&](double h, double& half_width) {
        const float plus = static_cast<float>(original + h);
        const float minus = static_cast<float>(original - h);
        x[i] = plus;
        const double l_plus = evaluate(f, u);
        x[i] = minus;
        const double l_minus = evaluate(f, u);
        const double step = static_cast<double>(plus) - static_cast<double>(minus);
        half_width = step / 2;
        return (l_plus - l_minus) / step;
      };
      double s1 = 0, s2 = 0;
      const double d1 = central(options.eps, s1);
      const double d2 = central(options.eps / 2, s2);
      const double numeric = (s1 * s1 * d2 - s2 * s2 * d1) / (s1 * s1 - s2 * s2);
      const double a = analytic[k][i];
      double rel = std::abs(a - numeric) / std::max({std::abs(a), std::abs(numeric), floor});
      if (std::isnan(rel)) rel = std::numeric_limits<double>::infinity();
      ++result.checked;
      if (rel > worst) {
        worst = rel;
        result.max_rel_error = rel;
        result.worst =
            fmt::format("input {} index {} of {}: analytic {:.6g} numeric {:.6g} rel {:.2e}", k, i,
                        wrt[k].shape().str(), a, numeric, rel);
      }
    }
  }
  result.pass = result.max_rel_error <= options.rtol;
  return result;
}

}  // namespace headlab
