// Normalisation and probabilities, all over the last dim ([rows, C] once leading dims are
// flattened). Forward and backward kernels come from kernels(), so every backend is exercised.
//   softmax:     y = exp(x - lse(x)),        dx = y * (g - sum_j g_j y_j)
//   log_softmax: y = x - lse(x),             dx = g - exp(y) * sum_j g_j
//   cross_entropy over n counted rows: L = -(1/n) sum_r log_softmax(x_r)[t_r], so
//                dL/dx_r = (softmax(x_r) - onehot(t_r)) / n for counted rows, 0 for ignored ones.
//                Forward saves that gradient; backward only scales it by the incoming scalar.
//   layer_norm:  y = (x - mean) * rstd * gain + bias; the kernel's backward gives dx, dgain, dbias
//                from the saved mean and rstd.

#include <cmath>

#include "autograd/ops.h"
#include "autograd/ops_internal.h"
#include "autograd/tape.h"
#include "core/elementwise.h"
#include "core/error.h"
#include "core/kernels/kernels.h"

namespace headlab {
namespace {

void check_rows(const char* op, const Var& x) {
  detail::check_defined(op, x);
  if (x.rank() < 1)
    fail("{}: input must have at least 1 dim but has shape {}", op, x.shape().str());
}

// Where a kernel that writes several gradients in one call puts v's contribution: straight into
// v's gradient when it is fresh, else into a pooled temporary that close() adds. When v needs no
// gradient, data() is a scratch buffer if the kernel requires the output, null otherwise.
class GradSink {
 public:
  GradSink(const Var& v, bool wanted, bool required) {
    if (wanted) {
      GradSlot slot = grad_slot(v);
      slot_ = slot.grad;
      if (slot.fresh) {
        buffer_ = slot.grad;
      } else {
        buffer_ = Tensor::empty(v.shape());
        add_ = true;
      }
    } else if (required) {
      buffer_ = Tensor::empty(v.shape());
    }
  }
  float* data() { return buffer_.defined() ? buffer_.data() : nullptr; }
  void close() {
    if (add_) ew::axpy(buffer_.data(), buffer_.numel(), 1.0f, slot_.data());
  }

 private:
  Tensor slot_, buffer_;
  bool add_ = false;
};

}  // namespace

Var softmax(const Var& x) {
  check_rows("softmax", x);
  const int64_t cols = x.shape().back();
  const int64_t rows = detail::leading_rows(x.shape());
  Var out = make_output("softmax", x.shape(), {&x});
  kernels().softmax_forward(x.value().data(), out.value().data(), rows, cols);
  record("softmax", out, [x, y = out.value(), rows, cols](const Tensor& g) {
    accumulate_grad(x, [&](Tensor& dst) {
      kernels().softmax_backward(y.data(), g.data(), dst.data(), rows, cols);
    });
  });
  return out;
}

Var log_softmax(const Var& x) {
  check_rows("log_softmax", x);
  const int64_t cols = x.shape().back();
  const int64_t rows = detail::leading_rows(x.shape());
  Var out = make_output("log_softmax", x.shape(), {&x});
  kernels().log_softmax_forward(x.value().data(), out.value().data(), rows, cols);
  record("log_softmax", out, [x, y = out.value(), rows, cols](const Tensor& g) {
    accumulate_grad(x, [&](Tensor& dst) {
      kernels().log_softmax_backward(y.data(), g.data(), dst.data(), rows, cols);
    });
  });
  return out;
}

Var cross_entropy(const Var& logits, std::span<const int32_t> targets, int32_t ignore_index) {
  check_rows("cross_entropy", logits);
  const int64_t classes = logits.shape().back();
  const int64_t rows = detail::leading_rows(logits.shape());
  if (static_cast<int64_t>(targets.size()) != rows)
    fail("cross_entropy: {} targets given for logits {} ({} rows)", targets.size(),
         logits.shape().str(), rows);
  int64_t count = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t t = targets[r];
    if (t == ignore_index) continue;
    if (t < 0 || t >= classes)
      fail("cross_entropy: target {} at row {} is outside [0, {}) and is not ignore_index {}", t, r,
           classes, ignore_index);
    ++count;
  }

  // logp [rows, C] is scratch; when recording, it is turned in place into dL/dlogits.
  Tensor logp = Tensor::empty(Shape{rows, classes});
  kernels().log_softmax_forward(logits.value().data(), logp.data(), rows, classes);
  double total = 0.0;
  for (int64_t r = 0; r < rows; ++r)
    if (targets[r] != ignore_index) total -= logp[r * classes + targets[r]];
  Var out = make_output("cross_entropy", Shape{1}, {&logits});
  out.value()[0] = count == 0 ? 0.0f : static_cast<float>(total / static_cast<double>(count));
  if (!out.requires_grad()) return out;

  const double inv = count == 0 ? 0.0 : 1.0 / static_cast<double>(count);
  for (int64_t r = 0; r < rows; ++r) {
    float* d = logp.data() + r * classes;
    if (targets[r] == ignore_index) {
      std::fill_n(d, classes, 0.0f);
      continue;
    }
    for (int64_t j = 0; j < classes; ++j) d[j] = static_cast<float>(std::exp(double{d[j]}) * inv);
    d[targets[r]] -= static_cast<float>(inv);
  }
  record("cross_entropy", out, [logits, dlogits = logp](const Tensor& g) {
    detail::add_into_grad(logits, dlogits, g[0]);
  });
  return out;
}

Var layer_norm(const Var& x, const Var& gain, const Var& bias, float eps) {
  check_rows("layer_norm", x);
  const int64_t cols = x.shape().back();
  const int64_t rows = detail::leading_rows(x.shape());
  if (gain.defined()) check_shape("layer_norm", "gain", gain.shape(), Shape{cols});
  if (bias.defined()) check_shape("layer_norm", "bias", bias.shape(), Shape{cols});
  // Undefined affine parameters are replaced by x in the input list (a duplicate is harmless).
  Var out = make_output("layer_norm", x.shape(),
                        {&x, gain.defined() ? &gain : &x, bias.defined() ? &bias : &x});
  Tensor mean = Tensor::empty(Shape{rows});
  Tensor rstd = Tensor::empty(Shape{rows});
  kernels().layer_norm_forward(x.value().data(), gain.defined() ? gain.value().data() : nullptr,
                               bias.defined() ? bias.value().data() : nullptr, out.value().data(),
                               mean.data(), rstd.data(), rows, cols, eps);

  record("layer_norm", out, [x, gain, bias, mean, rstd, rows, cols](const Tensor& g) {
    // The kernel always writes dx; dgain and dbias only where asked.
    GradSink dx(x, x.requires_grad(), true);
    GradSink dgain(gain, gain.defined() && gain.requires_grad(), false);
    GradSink dbias(bias, bias.defined() && bias.requires_grad(), false);
    kernels().layer_norm_backward(x.value().data(), gain.defined() ? gain.value().data() : nullptr,
                                  mean.data(), rstd.data(), g.data(), dx.data(), dgain.data(),
                                  dbias.data(), rows, cols);
    dx.close();
    dgain.close();
    dbias.close();
  });
  return out;
}

}  // namespace headlab
