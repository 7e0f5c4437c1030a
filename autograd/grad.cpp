#include "autograd/grad.h"

#include "core/elementwise.h"

namespace headlab::grad {

bool wanted(const Var& v) {
  return v.defined() && v.requires_grad();
}

Target target(const Var& v) {
  if (!wanted(v)) return {};
  Tensor& g = v.grad();
  if (g.defined()) return {g.data(), true};
  g = Tensor::empty(v.shape());
  return {g.data(), false};
}

void add(const Var& v, const Tensor& src, float alpha) {
  const Target t = target(v);
  if (!t) return;
  if (t.accumulate)
    ew::axpy(src.data(), src.numel(), alpha, t.data);
  else
    ew::scale(src.data(), src.numel(), alpha, t.data);
}

void add_gemm(const Var& v, GemmDesc d, const float* a, const float* b) {
  const Target t = target(v);
  if (!t) return;
  d.beta = t.accumulate ? 1.0f : 0.0f;
  kernels().gemm(d, a, b, t.data);
}

void detail::add_to(const Target& g, const Tensor& c) {
  ew::axpy(c.data(), c.numel(), 1.0f, g.data);
}

}  // namespace headlab::grad
