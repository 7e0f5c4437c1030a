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

#include "autograd/ops.h"
#include "autograd/ops_internal.h"
#include "autograd/tape.h"
#include "core/error.h"
#include "core/kernels/kernels.h"

namespace headlab {
namespace {

constexpr size_t kMaxParts = 4;

// alpha op(x) op(y) added into v's gradient ([m, n]), beta 0 when the gradient is fresh.
void gemm_into_grad(const Var& v, GemmDesc d, const float* x, const float* y) {
  GradSlot slot = grad_slot(v);
  d.beta = slot.fresh ? 0.0f : 1.0f;
  kernels().gemm(d, x, y, slot.grad.data());
}

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

// Whether the tensors are consecutive row blocks of one storage (part i + 1 starts where part i
// ends), so their concatenation can be read in place.
template <class Get>
bool adjacent(size_t n, Get get) {
  for (size_t i = 0; i + 1 < n; ++i) {
    const Tensor& a = get(i);
    const Tensor& b = get(i + 1);
    if (!a.defined() || !b.defined() || !a.shares_storage(b) || a.data() + a.numel() != b.data())
      return false;
  }
  return true;
}

}  // namespace

Var linear(const Var& x, const Var& weight, const Var& bias, bool relu) {
  detail::check_defined("linear", weight);
  if (weight.rank() != 2)
    fail("linear: weight must be [out, in] but has shape {}", weight.shape().str());
  const int64_t out_f = weight.size(0), in = weight.size(1);
  check_linear_input("linear", x, in);
  if (bias.defined()) check_shape("linear", "bias", bias.shape(), Shape{out_f});
  const int64_t rows = detail::leading_rows(x.shape());
  Var out = make_output("linear", with_last(x.shape(), out_f),
                        {&x, &weight, bias.defined() ? &bias : &x});
  kernels().gemm_bias_act({.trans_b = true, .m = rows, .n = out_f, .k = in}, x.value().data(),
                          weight.value().data(), bias.defined() ? bias.value().data() : nullptr,
                          relu, out.value().data());

  record("linear", out,
         [x, weight, bias, y = relu ? out.value() : Tensor(), rows, in, out_f](const Tensor& g) {
           const bool want_b = bias.defined() && bias.requires_grad();
           Tensor dz = g, db;
           if (want_b) db = Tensor::empty({out_f});
           if (y.defined()) {  // ReLU: dz = g * (y > 0), a pooled temporary
             dz = Tensor::empty(g.shape());
             kernels().bias_act_backward(g.data(), y.data(), dz.data(),
                                         want_b ? db.data() : nullptr, rows, out_f);
           } else if (want_b) {
             kernels().bias_act_backward(g.data(), nullptr, nullptr, db.data(), rows, out_f);
           }
           if (want_b) detail::add_into_grad(bias, db);
           if (x.requires_grad())  // dx [rows, in] = dz [rows, out] W [out, in]
             gemm_into_grad(x, {.m = rows, .n = in, .k = out_f}, dz.data(),
                            weight.value().data());
           if (weight.requires_grad())  // dW [out, in] = dz^T x
             gemm_into_grad(weight, {.trans_a = true, .m = out_f, .n = in, .k = rows}, dz.data(),
                            x.value().data());
         });
  return out;
}

Var linear_cat(const Var& x, std::span<const Var> weights, std::span<const Var> biases) {
  const size_t parts = weights.size();
  if (parts == 0 || parts > kMaxParts)
    fail("linear_cat: {} weights given but expected 1 to {}", parts, kMaxParts);
  if (!biases.empty() && biases.size() != parts)
    fail("linear_cat: {} biases given for {} weights (give one per weight or none)",
         biases.size(), parts);
  std::array<Var, kMaxParts> ws, bs;
  int64_t in = 0, total = 0;
  for (size_t i = 0; i < parts; ++i) {
    detail::check_defined("linear_cat", weights[i]);
    if (weights[i].rank() != 2)
      fail("linear_cat: weight {} must be [out, in] but has shape {}", i,
           weights[i].shape().str());
    if (i == 0) in = weights[i].size(1);
    if (weights[i].size(1) != in)
      fail("linear_cat: weight {} has shape {} but weight 0 has in_features {}", i,
           weights[i].shape().str(), in);
    ws[i] = weights[i];
    if (!biases.empty()) {
      detail::check_defined("linear_cat", biases[i]);
      check_shape("linear_cat", "bias", biases[i].shape(), Shape{weights[i].size(0)});
      bs[i] = biases[i];
    }
    total += weights[i].size(0);
  }
  check_linear_input("linear_cat", x, in);
  const int64_t rows = detail::leading_rows(x.shape());
  const bool has_bias = !biases.empty();

  // The stacked weight [total, in] and bias [total]: read in place when the parts are
  // consecutive in one storage (MultiHeadAttention keeps w_q, w_k, w_v so), else gathered.
  Tensor w_cat, b_cat;
  if (!adjacent(parts, [&](size_t i) -> const Tensor& { return ws[i].value(); })) {
    w_cat = Tensor::empty({total, in});
    for (size_t i = 0, off = 0; i < parts; off += static_cast<size_t>(ws[i].numel()), ++i)
      std::copy_n(ws[i].value().data(), ws[i].numel(), w_cat.data() + off);
  }
  if (has_bias && !adjacent(parts, [&](size_t i) -> const Tensor& { return bs[i].value(); })) {
    b_cat = Tensor::empty({total});
    for (size_t i = 0, off = 0; i < parts; off += static_cast<size_t>(bs[i].numel()), ++i)
      std::copy_n(bs[i].value().data(), bs[i].numel(), b_cat.data() + off);
  }
  const float* w_ptr = w_cat.defined() ? w_cat.data() : ws[0].value().data();
  const float* b_ptr = !has_bias ? nullptr : b_cat.defined() ? b_cat.data() : bs[0].value().data();

  // make_output takes a fixed list: every part is passed (unused slots repeat x).
  auto in_at = [&](const std::array<Var, kMaxParts>& v, size_t i) {
    return i < parts && v[i].defined() ? &v[i] : &x;
  };
  Var out = make_output("linear_cat", with_last(x.shape(), total),
                        {&x, in_at(ws, 0), in_at(ws, 1), in_at(ws, 2), in_at(ws, 3), in_at(bs, 0),
                         in_at(bs, 1), in_at(bs, 2), in_at(bs, 3)});
  kernels().gemm_bias_act({.trans_b = true, .m = rows, .n = total, .k = in}, x.value().data(),
                          w_ptr, b_ptr, false, out.value().data());

  record("linear_cat", out, [x, ws, bs, w_cat, parts, rows, in, total](const Tensor& g) {
    // db [total]: column sums of g, split among the biases.
    bool want_b = false;
    for (size_t i = 0; i < parts; ++i) want_b = want_b || (bs[i].defined() && bs[i].requires_grad());
    if (want_b) {
      Tensor db = Tensor::empty({total});
      kernels().bias_act_backward(g.data(), nullptr, nullptr, db.data(), rows, total);
      int64_t off = 0;
      for (size_t i = 0; i < parts; off += bs[i].numel(), ++i)
        if (bs[i].requires_grad()) detail::add_into_grad(bs[i], db.slice(off, off + bs[i].numel()));
    }
    if (x.requires_grad())  // dx = g [rows, total] W_cat [total, in]
      gemm_into_grad(x, {.m = rows, .n = in, .k = total}, g.data(),
                     w_cat.defined() ? w_cat.data() : ws[0].value().data());

    // dW_cat = g^T x [total, in]: one GEMM when the parts' gradients are (or become) consecutive
    // row blocks of one buffer, else one GEMM per part on g's column block.
    bool all_want = true, none_defined = true, all_defined = true;
    for (size_t i = 0; i < parts; ++i) {
      all_want = all_want && ws[i].requires_grad();
      none_defined = none_defined && !ws[i].has_grad();
      all_defined = all_defined && ws[i].has_grad();
    }
    const bool values_adjacent = !w_cat.defined();
    const GemmDesc dw{.trans_a = true, .m = total, .n = in, .k = rows};
    if (all_want && values_adjacent && none_defined) {
      Tensor fused = Tensor::empty({total, in});
      for (size_t i = 0, row = 0; i < parts; row += static_cast<size_t>(ws[i].size(0)), ++i)
        ws[i].grad() = fused.slice(static_cast<int64_t>(row),
                                   static_cast<int64_t>(row) + ws[i].size(0));
      kernels().gemm(dw, g.data(), x.value().data(), fused.data());
      return;
    }
    if (all_want && all_defined &&
        adjacent(parts, [&](size_t i) -> const Tensor& { return ws[i].grad(); })) {
      GemmDesc d = dw;
      d.beta = 1.0f;
      kernels().gemm(d, g.data(), x.value().data(), ws[0].grad().data());
      return;
    }
    for (size_t i = 0, off = 0; i < parts; off += static_cast<size_t>(ws[i].size(0)), ++i)
      if (ws[i].requires_grad())  // dW_i = g[:, off:off+out_i]^T x
        gemm_into_grad(ws[i],
                       {.trans_a = true, .m = ws[i].size(0), .n = in, .k = rows, .lda = total},
                       g.data() + off, x.value().data());
  });
  return out;
}

Var add_layer_norm(const Var& x, const Var& r, const Var& gain, const Var& bias, float eps) {
  detail::check_defined("add_layer_norm", x);
  detail::check_defined("add_layer_norm", r);
  if (x.rank() < 1) fail("add_layer_norm: x must have at least 1 dim but has shape {}", x.shape().str());
  check_shape("add_layer_norm", "r", r.shape(), x.shape());
  const int64_t cols = x.shape().back();
  const int64_t rows = detail::leading_rows(x.shape());
  if (gain.defined()) check_shape("add_layer_norm", "gain", gain.shape(), Shape{cols});
  if (bias.defined()) check_shape("add_layer_norm", "bias", bias.shape(), Shape{cols});
  Var out = make_output("add_layer_norm", x.shape(),
                        {&x, &r, gain.defined() ? &gain : &x, bias.defined() ? &bias : &x});
  // xhat [rows, cols] and rstd [rows] share one pooled buffer.
  Tensor saved = Tensor::empty({rows * cols + rows});
  float* xhat = saved.data();
  float* rstd = xhat + rows * cols;
  kernels().add_layer_norm_forward(x.value().data(), r.value().data(),
                                   gain.defined() ? gain.value().data() : nullptr,
                                   bias.defined() ? bias.value().data() : nullptr,
                                   out.value().data(), xhat, rstd, rows, cols, eps);

  record("add_layer_norm", out, [x, r, gain, bias, saved, rows, cols](const Tensor& g) {
    const float* xhat = saved.data();
    const float* rstd = xhat + rows * cols;
    const bool want_x = x.requires_grad(), want_r = r.requires_grad();
    const bool want_gain = gain.defined() && gain.requires_grad();
    const bool want_bias = bias.defined() && bias.requires_grad();
    Tensor dgain = want_gain ? Tensor::empty({cols}) : Tensor();
    Tensor dbias = want_bias ? Tensor::empty({cols}) : Tensor();
    const float* gain_ptr = gain.defined() ? gain.value().data() : nullptr;
    auto run = [&](float* d1, bool acc1, float* d2, bool acc2) {
      kernels().add_layer_norm_backward(xhat, rstd, gain_ptr, g.data(), d1, acc1, d2, acc2,
                                        want_gain ? dgain.data() : nullptr,
                                        want_bias ? dbias.data() : nullptr, rows, cols);
    };
    if (want_x && want_r && x.node() != r.node()) {
      GradSlot sx = grad_slot(x);
      GradSlot sr = grad_slot(r);
      run(sx.grad.data(), !sx.fresh, sr.grad.data(), !sr.fresh);
    } else if (want_x || want_r) {  // one target; the same Var twice receives 2 ds
      const Var& v = want_x ? x : r;
      const bool twice = want_x && want_r;
      GradSlot s = grad_slot(v);
      if (!twice) {
        run(s.grad.data(), !s.fresh, nullptr, false);
      } else {
        Tensor ds = Tensor::empty(x.shape());
        run(ds.data(), false, nullptr, false);
        if (s.fresh)
          ew::scale(ds.data(), ds.numel(), 2.0f, s.grad.data());
        else
          ew::axpy(ds.data(), ds.numel(), 2.0f, s.grad.data());
      }
    } else {  // only the affine parameters: ds goes to scratch
      Tensor ds = Tensor::empty(x.shape());
      run(ds.data(), false, nullptr, false);
    }
    if (want_gain) detail::add_into_grad(gain, dgain);
    if (want_bias) detail::add_into_grad(bias, dbias);
  });
  return out;
}

}  // namespace headlab
