// Fused ops: one kernel pass (and one tape entry) where the composed ops take several.
//   linear:      y = act(x W^T + b)                 dz = g * act'(y)   (ReLU: y > 0)
//                dx = dz W,  dW = dz^T x,  db = sum over rows of dz
//   add_layer_norm: y = LayerNorm(x + r); with xhat, rstd saved and u = g * gain:
//                ds = rstd (u - mean(u) - xhat mean(u xhat)) is the gradient of x and of r,
//                dgain = sum over rows of g xhat, dbias = sum over rows of g
// GEMMs accumulate into a gradient through beta (0 when it is fresh); the other kernels write
// straight into a fresh gradient or add into one that already holds a contribution.

#include "autograd/grad.h"
#include "autograd/ops.h"
#include "autograd/ops_internal.h"
#include "autograd/tape.h"
#include "core/error.h"
#include "core/kernels/kernels.h"

namespace headlab {
namespace {

void check_linear_input(const char* op, const Var& x, int64_t in) {
  detail::check_defined(op, x);
  if (x.rank() < 1 || x.size(-1) != in)
    fail("{}: input shape {} has last dim {} but the weight has in_features {}", op,
         x.shape().str(), x.rank() < 1 ? 0 : x.size(-1), in);
}

Shape with_last(const Shape& s, int64_t last) {
  Shape out = s;
  out[-1] = last;
  return out;
}

}  // namespace

Var linear(const Var& x, const Var& weight, const Var& bias, bool relu) {
  constexpr const char* kOp = "linear";
  detail::check_defined(kOp, weight);
  if (weight.rank() != 2)
    fail("{}: weight must be [out, in] but has shape {}", kOp, weight.shape().str());
  const int64_t out_f = weight.size(0), in = weight.size(1);
  check_linear_input(kOp, x, in);
  if (bias.defined()) check_shape(kOp, "bias", bias.shape(), Shape{out_f});
  const int64_t rows = detail::leading_rows(x.shape());
  Var out = make_output(kOp, with_last(x.shape(), out_f), {&x, &weight, &bias});
  kernels().gemm_bias_act({.trans_b = true, .m = rows, .n = out_f, .k = in}, x.value().data(),
                          weight.value().data(), detail::data_or_null(bias), relu,
                          out.value().data());

  record(kOp, out,
         [x, weight, bias, y = relu ? out.value() : Tensor(), rows, in, out_f](const Tensor& g) {
           Tensor db = grad::wanted(bias) ? Tensor::empty({out_f}) : Tensor();
           const grad::Target dx = grad::wanted(x) ? grad::target(x) : grad::Target{};
           // The same Var as input and weight would get both products in one gradient: dW then
           // goes to a temporary that is added after (grad::add decides write or add then).
           Tensor dw_alone;
           grad::Target dw;
           if (grad::wanted(weight)) {
             if (x.node() == weight.node()) {
               dw_alone = Tensor::empty(weight.shape());
               dw = {dw_alone.data(), false};
             } else {
               dw = grad::target(weight);
             }
           }
           kernels().linear_backward(g.data(), y.defined() ? y.data() : nullptr, x.value().data(),
                                     weight.value().data(), rows, in, out_f,
                                     {.dx = dx.data,
                                      .accumulate_dx = dx.accumulate,
                                      .dw = dw.data,
                                      .accumulate_dw = dw.accumulate,
                                      .db = detail::data_or_null(db)});
           if (dw_alone.defined()) grad::add(weight, dw_alone);
           grad::add(bias, db);
         });
  return out;
}

Var add_layer_norm(const Var& x, const Var& r, const Var& gain, const Var& bias, float eps) {
  constexpr const char* kOp = "add_layer_norm";
  detail::check_defined(kOp, x);
  detail::check_defined(kOp, r);
  if (x.rank() < 1) fail("{}: x must have at least 1 dim but has shape {}", kOp, x.shape().str());
  check_shape(kOp, "r", r.shape(), x.shape());
  const int64_t cols = x.shape().back();
  const int64_t rows = detail::leading_rows(x.shape());
  if (gain.defined()) check_shape(kOp, "gain", gain.shape(), Shape{cols});
  if (bias.defined()) check_shape(kOp, "bias", bias.shape(), Shape{cols});
  Var out = make_output(kOp, x.shape(), {&x, &r, &gain, &bias});
  // xhat [rows, cols] and rstd [rows] share one pooled buffer.
  Tensor saved = Tensor::empty({rows * cols + rows});
  float* xhat = saved.data();
  float* rstd = xhat + rows * cols;
  kernels().add_layer_norm_forward(x.value().data(), r.value().data(), detail::data_or_null(gain),
                                   detail::data_or_null(bias), out.value().data(), xhat, rstd, rows,
                                   cols, eps);

  record(kOp, out, [x, r, gain, bias, saved, rows, cols](const Tensor& g) {
    const float* xhat = saved.data();
    const float* rstd = xhat + rows * cols;
    Tensor dgain = grad::wanted(gain) ? Tensor::empty({cols}) : Tensor();
    Tensor dbias = grad::wanted(bias) ? Tensor::empty({cols}) : Tensor();
    // ds, the gradient of both x and r, goes to up to two targets (or to scratch).
    auto run = [&](grad::Target d1, grad::Target d2) {
      kernels().add_layer_norm_backward(
          xhat, rstd, detail::data_or_null(gain), g.data(), d1.data, d1.accumulate, d2.data,
          d2.accumulate, detail::data_or_null(dgain), detail::data_or_null(dbias), rows, cols);
    };
    const bool want_x = grad::wanted(x), want_r = grad::wanted(r);
    if (want_x && want_r && x.node() != r.node()) {
      const grad::Target tx = grad::target(x);
      run(tx, grad::target(r));
    } else if (want_x != want_r) {
      run(grad::target(want_x ? x : r), {});
    } else {  // the same Var twice (it receives 2 ds), or only the affine parameters
      Tensor ds = Tensor::empty(x.shape());
      run({ds.data(), false}, {});
      if (want_x) grad::add(x, ds, 2.0f);
    }
    grad::add(gain, dgain);
    grad::add(bias, dbias);
  });
  return out;
}

}  // namespace headlab
