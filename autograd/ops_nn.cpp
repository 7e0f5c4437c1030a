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

#include "autograd/grad.h"
#include "autograd/ops.h"
#include "autograd/ops_internal.h"
#include "autograd/tape.h"
#include "core/error.h"
#include "core/kernels/kernels.h"

namespace headlab {
namespace {

void check_rows(const char* op, const Var& x) {
  detail::check_defined(op, x);
  if (x.rank() < 1)
    fail("{}: input must have at least 1 dim but has shape {}", op, x.shape().str());
}

// softmax and log_softmax over the last dim: y by the kernels' forward, dx from y and g by their
// backward.
using RowForward = void (Kernels::*)(const float* x, float* y, int64_t rows, int64_t cols) const;
using RowBackward = void (Kernels::*)(const float* y, const float* dy, float* dx, int64_t rows,
                                      int64_t cols) const;

Var row_op(const char* op, const Var& x, RowForward forward, RowBackward backward) {
  check_rows(op, x);
  const int64_t cols = x.shape().back();
  const int64_t rows = detail::leading_rows(x.shape());
  Var out = make_output(op, x.shape(), {&x});
  (kernels().*forward)(x.value().data(), out.value().data(), rows, cols);
  record(op, out, [x, y = out.value(), rows, cols, backward](const Tensor& g) {
    grad::add(
        x, [&](Tensor& dx) { (kernels().*backward)(y.data(), g.data(), dx.data(), rows, cols); });
  });
  return out;
}

}  // namespace

Var softmax(const Var& x) {
  return row_op("softmax", x, &Kernels::softmax_forward, &Kernels::softmax_backward);
}

Var log_softmax(const Var& x) {
  return row_op("log_softmax", x, &Kernels::log_softmax_forward, &Kernels::log_softmax_backward);
}

Var cross_entropy(const Var& logits, std::span<const int32_t> targets, int32_t ignore_index) {
  constexpr const char* kOp = "cross_entropy";
  check_rows(kOp, logits);
  const int64_t classes = logits.shape().back();
  const int64_t rows = detail::leading_rows(logits.shape());
  if (static_cast<int64_t>(targets.size()) != rows)
    fail("{}: {} targets given for logits {} ({} rows)", kOp, targets.size(), logits.shape().str(),
         rows);
  int64_t count = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t t = targets[r];
    if (t == ignore_index) continue;
    if (t < 0 || t >= classes)
      fail("{}: target {} at row {} is outside [0, {}) and is not ignore_index {}", kOp, t, r,
           classes, ignore_index);
    ++count;
  }

  // logp [rows, C] is scratch; when recording, it is turned in place into dL/dlogits.
  Tensor logp = Tensor::empty(Shape{rows, classes});
  kernels().log_softmax_forward(logits.value().data(), logp.data(), rows, classes);
  double total = 0.0;
  for (int64_t r = 0; r < rows; ++r)
    if (targets[r] != ignore_index) total -= logp[r * classes + targets[r]];
  Var out = make_output(kOp, Shape{1}, {&logits});
  out.value()[0] = count == 0 ? 0.0f : static_cast<float>(total / static_cast<double>(count));
  if (!out.requires_grad()) {
    profile_event(ProfileEvent::forward_done, kOp);  // record() is not reached
    return out;
  }

  // dL/dlogits = (softmax(logits) - onehot(target)) / count per counted row, 0 elsewhere; the
  // probabilities come from the softmax kernel (vectorized) into logp's buffer.
  const double inv = count == 0 ? 0.0 : 1.0 / static_cast<double>(count);
  kernels().softmax_forward(logits.value().data(), logp.data(), rows, classes);
  for (int64_t r = 0; r < rows; ++r) {
    float* d = logp.data() + r * classes;
    if (targets[r] == ignore_index) {
      std::fill_n(d, classes, 0.0f);
      continue;
    }
    for (int64_t j = 0; j < classes; ++j) d[j] = static_cast<float>(d[j] * inv);
    d[targets[r]] -= static_cast<float>(inv);
  }
  record(kOp, out, [logits, dlogits = logp](const Tensor& g) { grad::add(logits, dlogits, g[0]); });
  return out;
}

Var layer_norm(const Var& x, const Var& gain, const Var& bias, float eps) {
  constexpr const char* kOp = "layer_norm";
  check_rows(kOp, x);
  const int64_t cols = x.shape().back();
  const int64_t rows = detail::leading_rows(x.shape());
  if (gain.defined()) check_shape(kOp, "gain", gain.shape(), Shape{cols});
  if (bias.defined()) check_shape(kOp, "bias", bias.shape(), Shape{cols});
  Var out = make_output(kOp, x.shape(), {&x, &gain, &bias});
  Tensor mean = Tensor::empty(Shape{rows});
  Tensor rstd = Tensor::empty(Shape{rows});
  kernels().layer_norm_forward(x.value().data(), detail::data_or_null(gain),
                               detail::data_or_null(bias), out.value().data(), mean.data(),
                               rstd.data(), rows, cols, eps);

  record(kOp, out, [x, gain, bias, mean, rstd, rows, cols](const Tensor& g) {
    // The kernel writes dx always (scratch when x needs none), dgain and dbias where asked.
    Tensor dgain = grad::wanted(gain) ? Tensor::empty({cols}) : Tensor();
    Tensor dbias = grad::wanted(bias) ? Tensor::empty({cols}) : Tensor();
    auto backward = [&](Tensor& dx) {
      kernels().layer_norm_backward(x.value().data(), detail::data_or_null(gain), mean.data(),
                                    rstd.data(), g.data(), dx.data(), detail::data_or_null(dgain),
                                    detail::data_or_null(dbias), rows, cols);
    };
    if (grad::wanted(x)) {
      grad::add(x, backward);
    } else {
      Tensor scratch = Tensor::empty(x.shape());
      backward(scratch);
    }
    grad::add(gain, dgain);
    grad::add(bias, dbias);
  });
  return out;
}

}  // namespace headlab
