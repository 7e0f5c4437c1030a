#pragma once
// Helpers shared by the op files (internal to autograd; not part of the public API).

#include <cstdint>

#include "autograd/var.h"
#include "core/elementwise.h"
#include "core/error.h"

namespace headlab::detail {

// v.grad += alpha * src (same numel as v; the shape may differ, as for reshape). Writes straight
// into a fresh gradient, so there is no temporary.
inline void add_into_grad(const Var& v, const Tensor& src, float alpha = 1.0f) {
  GradSlot slot = grad_slot(v);
  if (slot.fresh)
    ew::scale(src.data(), src.numel(), alpha, slot.grad.data());
  else
    ew::axpy(src.data(), src.numel(), alpha, slot.grad.data());
}

// Throws "op: an input is undefined" (the same message make_output gives) for ops that read
// shapes before make_output.
inline void check_defined(const char* op, const Var& v) {
  if (!v.defined()) fail("{}: an input is undefined", op);
}

// Product of the dims before the last: the rows of a [.., C] tensor viewed as a matrix (also
// right when C is 0, unlike numel() / C).
inline int64_t leading_rows(const Shape& s) {
  int64_t rows = 1;
  for (int i = 0; i + 1 < s.rank(); ++i) rows *= s[i];
  return rows;
}

}  // namespace headlab::detail
