// matmul and batched_matmul. For C = op(A) op(B):
//   dA = dC op(B)^T   (or op(B) dC^T transposed back when A was transposed)
//   dB = op(A)^T dC   (likewise)
// Each gradient is one GEMM that accumulates into the input's gradient through beta.

#include "autograd/grad.h"
#include "autograd/ops.h"
#include "autograd/ops_internal.h"
#include "autograd/tape.h"
#include "core/error.h"
#include "core/kernels/kernels.h"

namespace headlab {

Var matmul(const Var& a, const Var& b, bool trans_a, bool trans_b) {
  constexpr const char* kOp = "matmul";
  detail::check_defined(kOp, a);
  detail::check_defined(kOp, b);
  if (b.rank() != 2) fail("{}: b must be 2-D but has shape {}", kOp, b.shape().str());
  if (a.rank() < 2) fail("{}: a must have at least 2 dims but has shape {}", kOp, a.shape().str());
  if (trans_a && a.rank() != 2)
    fail("{}: a transposed must be 2-D but has shape {}", kOp, a.shape().str());
  const int64_t k = trans_a ? a.size(0) : a.size(-1);
  const int64_t m = a.numel() / (k == 0 ? 1 : k);
  const int64_t kb = trans_b ? b.size(1) : b.size(0);
  const int64_t n = trans_b ? b.size(0) : b.size(1);
  if (k != kb)
    fail("{}: inner dims differ: a {}{} and b {}{} ({} vs {})", kOp, a.shape().str(),
         trans_a ? "^T" : "", b.shape().str(), trans_b ? "^T" : "", k, kb);
  Shape out_shape;
  if (trans_a) {
    out_shape = Shape{m, n};
  } else {
    for (int i = 0; i < a.rank() - 1; ++i) out_shape.push_back(a.size(i));
    out_shape.push_back(n);
  }
  Var out = make_output(kOp, out_shape, {&a, &b});
  GemmDesc d{.trans_a = trans_a, .trans_b = trans_b, .m = m, .n = n, .k = k};
  kernels().gemm(d, a.value().data(), b.value().data(), out.value().data());

  record(kOp, out, [a, b, trans_a, trans_b, m, n, k](const Tensor& g) {
    // g: [m, n]. A stored [m, k] (or [k, m]); B stored [k, n] (or [n, k]).
    if (!trans_a)  // dA[m,k] = g[m,n] op(B)^T
      grad::add_gemm(a, {.trans_a = false, .trans_b = !trans_b, .m = m, .n = k, .k = n}, g.data(),
                     b.value().data());
    else  // dA[k,m] = op(B) g^T
      grad::add_gemm(a, {.trans_a = trans_b, .trans_b = true, .m = k, .n = m, .k = n},
                     b.value().data(), g.data());
    if (!trans_b)  // dB[k,n] = op(A)^T g
      grad::add_gemm(b, {.trans_a = !trans_a, .trans_b = false, .m = k, .n = n, .k = m},
                     a.value().data(), g.data());
    else  // dB[n,k] = g^T op(A)
      grad::add_gemm(b, {.trans_a = true, .trans_b = trans_a, .m = n, .n = k, .k = m}, g.data(),
                     a.value().data());
  });
  return out;
}

Var batched_matmul(const Var& a, const Var& b, bool trans_a, bool trans_b) {
  constexpr const char* kOp = "batched_matmul";
  detail::check_defined(kOp, a);
  detail::check_defined(kOp, b);
  if (a.rank() < 3 || a.rank() != b.rank())
    fail("{}: a {} and b {} must have the same rank >= 3", kOp, a.shape().str(), b.shape().str());
  int64_t batch = 1;
  for (int i = 0; i < a.rank() - 2; ++i) {
    if (a.size(i) != b.size(i))
      fail("{}: batch dims differ: a {} vs b {}", kOp, a.shape().str(), b.shape().str());
    batch *= a.size(i);
  }
  const int64_t m = trans_a ? a.size(-1) : a.size(-2);
  const int64_t k = trans_a ? a.size(-2) : a.size(-1);
  const int64_t kb = trans_b ? b.size(-1) : b.size(-2);
  const int64_t n = trans_b ? b.size(-2) : b.size(-1);
  if (k != kb)
    fail("{}: inner dims differ: a {}{} and b {}{} ({} vs {})", kOp, a.shape().str(),
         trans_a ? "^T" : "", b.shape().str(), trans_b ? "^T" : "", k, kb);
  Shape out_shape = a.shape();
  out_shape[-2] = m;
  out_shape[-1] = n;
  Var out = make_output(kOp, out_shape, {&a, &b});
  GemmDesc d{.trans_a = trans_a, .trans_b = trans_b, .m = m, .n = n, .k = k, .batch = batch};
  kernels().gemm(d, a.value().data(), b.value().data(), out.value().data());

  record(kOp, out, [a, b, trans_a, trans_b, m, n, k, batch](const Tensor& g) {
    if (!trans_a)
      grad::add_gemm(a, {.trans_b = !trans_b, .m = m, .n = k, .k = n, .batch = batch}, g.data(),
                     b.value().data());
    else
      grad::add_gemm(a,
                     {.trans_a = trans_b, .trans_b = true, .m = k, .n = m, .k = n, .batch = batch},
                     b.value().data(), g.data());
    if (!trans_b)
      grad::add_gemm(b, {.trans_a = !trans_a, .m = k, .n = n, .k = m, .batch = batch},
                     a.value().data(), g.data());
    else
      grad::add_gemm(b,
                     {.trans_a = true, .trans_b = trans_a, .m = n, .n = k, .k = m, .batch = batch},
                     g.data(), a.value().data());
  });
  return out;
}

}  // namespace headlab
