// Fused ops: one kernel pass (and one tape entry) where the composed ops take several.
//   linear:      y = act(x W^T + b)                 dz = g * act'(y)   (ReLU: y > 0)
//                dx = dz W,  dW = dz^T x,  db = sum over rows of dz
//   linear_cat:  linear with W = [W_0; W_1; ..] and b = [b_0; b_1; ..] stacked along the output
//                dim; each W_i's gradient is the row block of dW that belongs to it
//   add_layer_norm: y = LayerNorm(x + r); with xhat, rstd saved and u = g * gain:
//                ds = rstd (u - mean(u) - xhat mean(u xhat)) is the gradient of x and of r,
//                dgain = sum over rows of g xhat, dbias = sum over rows of g
// GEMMs accumulate into a gradient through beta (0 when it is fresh); the other kernels write
// straight into a fresh gradient or add into one that already holds a contribution.

#include <algorithm>
#include <array>

#include "autograd/grad.h"
#include "autograd/ops.h"
#include "autograd/ops_internal.h"
#include "autograd/packed_params.h"
#include "autograd/tape.h"
#include "core/error.h"
#include "core/kernels/kernels.h"

namespace headlab {
namespace {

constexpr size_t kMaxParts = 4;

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
           const bool want_b = grad::wanted(bias);
           Tensor dz = g, db;
           if (want_b) db = Tensor::empty({out_f});
           if (y.defined()) {  // ReLU: dz = g * (y > 0), a pooled temporary
             dz = Tensor::empty(g.shape());
             kernels().bias_act_backward(g.data(), y.data(), dz.data(),
                                         want_b ? db.data() : nullptr, rows, out_f);
           } else if (want_b) {
             kernels().bias_act_backward(g.data(), nullptr, nullptr, db.data(), rows, out_f);
           }
           grad::add(bias, db);
           // dx [rows, in] = dz [rows, out] W [out, in];  dW [out, in] = dz^T x
           grad::add_gemm(x, {.m = rows, .n = in, .k = out_f}, dz.data(), weight.value().data());
           grad::add_gemm(weight, {.trans_a = true, .m = out_f, .n = in, .k = rows}, dz.data(),
                          x.value().data());
         });
  return out;
}

namespace {

// linear_cat's parts, checked: weights [out_i, in] and biases [out_i] (none or one each).
struct Parts {
  std::array<Var, kMaxParts> w, b;  // unused slots undefined
  size_t n = 0;
  int64_t in = 0, total = 0;
  bool has_bias = false;
  std::span<const Var> weights() const { return {w.data(), n}; }
  std::span<const Var> biases() const { return {b.data(), has_bias ? n : 0}; }
};

Parts check_parts(const char* op, std::span<const Var> weights, std::span<const Var> biases) {
  Parts p;
  p.n = weights.size();
  if (p.n == 0 || p.n > kMaxParts)
    fail("{}: {} weights given but expected 1 to {}", op, p.n, kMaxParts);
  if (!biases.empty() && biases.size() != p.n)
    fail("{}: {} biases given for {} weights (give one per weight or none)", op, biases.size(),
         p.n);
  p.has_bias = !biases.empty();
  for (size_t i = 0; i < p.n; ++i) {
    detail::check_defined(op, weights[i]);
    if (weights[i].rank() != 2)
      fail("{}: weight {} must be [out, in] but has shape {}", op, i, weights[i].shape().str());
    if (i == 0) p.in = weights[i].size(1);
    if (weights[i].size(1) != p.in)
      fail("{}: weight {} has shape {} but weight 0 has in_features {}", op, i,
           weights[i].shape().str(), p.in);
    p.w[i] = weights[i];
    if (p.has_bias) {
      detail::check_defined(op, biases[i]);
      check_shape(op, "bias", biases[i].shape(), Shape{weights[i].size(0)});
      p.b[i] = biases[i];
    }
    p.total += weights[i].size(0);
  }
  return p;
}

// The parts' values stacked along dim 0 ([sum rows, ..]): read in place when packed
// (autograd/packed_params.h), else gathered into `copy`.
const float* stacked_values(std::span<const Var> parts, Tensor& copy) {
  if (packed::values_packed(parts)) return parts[0].value().data();
  Shape shape = parts[0].shape();
  shape[0] = 0;
  for (const Var& v : parts) shape[0] += v.size(0);
  copy = Tensor::empty(shape);
  for (size_t i = 0, off = 0; i < parts.size(); off += static_cast<size_t>(parts[i].numel()), ++i)
    std::copy_n(parts[i].value().data(), parts[i].numel(), copy.data() + off);
  return copy.data();
}

// dW_cat = g^T x [total, in]: one GEMM into the packed gradients when they can be (see
// packed::grad_target), else one GEMM per wanted part on g's column block.
void linear_cat_weight_grads(const Parts& p, const Tensor& g, const Var& x, int64_t rows) {
  if (const grad::Target t = packed::grad_target(p.weights())) {
    kernels().gemm(
        {.trans_a = true, .m = p.total, .n = p.in, .k = rows, .beta = t.accumulate ? 1.0f : 0.0f},
        g.data(), x.value().data(), t.data);
    return;
  }
  for (size_t i = 0, off = 0; i < p.n; off += static_cast<size_t>(p.w[i].size(0)), ++i)
    grad::add_gemm(p.w[i],  // dW_i = g[:, off:off+out_i]^T x
                   {.trans_a = true, .m = p.w[i].size(0), .n = p.in, .k = rows, .lda = p.total},
                   g.data() + off, x.value().data());
}

}  // namespace

Var linear_cat(const Var& x, std::span<const Var> weights, std::span<const Var> biases) {
  constexpr const char* kOp = "linear_cat";
  const Parts p = check_parts(kOp, weights, biases);
  check_linear_input(kOp, x, p.in);
  const int64_t rows = detail::leading_rows(x.shape());
  Tensor w_cat, b_cat;  // gathered copies, when the parts are not packed
  const float* w_ptr = stacked_values(p.weights(), w_cat);
  const float* b_ptr = p.has_bias ? stacked_values(p.biases(), b_cat) : nullptr;
  Var out =
      make_output(kOp, with_last(x.shape(), p.total),
                  {&x, &p.w[0], &p.w[1], &p.w[2], &p.w[3], &p.b[0], &p.b[1], &p.b[2], &p.b[3]});
  kernels().gemm_bias_act({.trans_b = true, .m = rows, .n = p.total, .k = p.in}, x.value().data(),
                          w_ptr, b_ptr, false, out.value().data());

  record(kOp, out, [x, p, w_cat, rows](const Tensor& g) {
    // db [total]: column sums of g, split among the biases.
    if (std::any_of(p.b.begin(), p.b.end(), grad::wanted)) {
      Tensor db = Tensor::empty({p.total});
      kernels().bias_act_backward(g.data(), nullptr, nullptr, db.data(), rows, p.total);
      for (size_t i = 0, off = 0; i < p.n; off += static_cast<size_t>(p.b[i].numel()), ++i)
        grad::add(p.b[i],
                  db.slice(static_cast<int64_t>(off), static_cast<int64_t>(off) + p.b[i].numel()));
    }
    // dx = g [rows, total] W_cat [total, in]
    grad::add_gemm(x, {.m = rows, .n = p.in, .k = p.total}, g.data(),
                   w_cat.defined() ? w_cat.data() : p.w[0].value().data());
    linear_cat_weight_grads(p, g, x, rows);
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
