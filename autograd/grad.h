#pragma once
// The one way a backward puts a contribution into an input's gradient (autograd's ops and
// custom ops alike; examples/custom_layer uses it).
//
// Backward accumulates and never assigns: the first contribution to v's gradient is written
// straight into a new buffer (fresh: taken uninitialised from the pool, so there is no zero fill
// and no temporary), every later one is added to it. An input that is undefined (an absent bias
// or gain) or needs no gradient is skipped: the functions do nothing for it, and target()
// returns a null target.
//
//   grad::add(v, src, alpha)    v.grad += alpha * src (src: any shape with v's numel)
//   grad::add(v, write)         v.grad += what write(Tensor& dst) writes; write overwrites all
//                               of dst [v.shape()], which is v's fresh gradient itself or a
//                               pooled temporary that is then added
//   grad::add_gemm(v, d, a, b)  v.grad += d.alpha op(a) op(b) ([d.m, d.n] per batch item), by
//                               the GEMM's beta: 0 into a fresh gradient, 1 after
//   grad::target(v)             {data, accumulate} for a kernel that writes or adds by a flag
//                               (Kernels::add_layer_norm_backward, attention_backward)
//   grad::wanted(v)             whether v takes a gradient at all
//
// Each function decides fresh or not when it is called, so an input passed twice to one op
// (mul(x, x)) gets its first term written and its second added.

#include <concepts>

#include "autograd/var.h"
#include "core/kernels/kernels.h"

namespace headlab::grad {

// Where a kernel puts v's contribution: data is v's gradient (null: skip v), and accumulate says
// whether to add into it (false: it is fresh and uninitialised; write it).
struct Target {
  float* data = nullptr;
  bool accumulate = false;
  explicit operator bool() const { return data != nullptr; }
};

bool wanted(const Var& v);

// Allocates v's gradient on first use (uninitialised).
Target target(const Var& v);

void add(const Var& v, const Tensor& src, float alpha = 1.0f);

void add_gemm(const Var& v, GemmDesc d, const float* a, const float* b);

namespace detail {
// g += c elementwise.
void add_to(const Target& g, const Tensor& c);
}  // namespace detail

template <class Write>
requires std::invocable<Write&, Tensor&>
void add(const Var& v, Write&& write) {
  const Target t = target(v);
  if (!t) return;
  if (!t.accumulate) {
    write(v.grad());
    return;
  }
  Tensor contribution = Tensor::empty(v.shape());
  write(contribution);
  detail::add_to(t, contribution);
}

}  // namespace headlab::grad
