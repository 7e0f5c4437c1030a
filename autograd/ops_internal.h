#pragma once
// Helpers shared by the op files (internal to autograd; not part of the public API).

#include <cstdint>

#include "autograd/var.h"
#include "core/error.h"

namespace headlab::detail {

// Throws "op: an input is undefined" for a required input (make_output skips undefined inputs:
// they are the absent optional ones).
inline void check_defined(const char* op, const Var& v) {
  if (!v.defined()) fail("{}: an input is undefined", op);
}

// The data of an optional input or buffer (a gain, a bias), or null when it is absent.
inline const float* data_or_null(const Var& v) { return v.defined() ? v.value().data() : nullptr; }
inline float* data_or_null(Tensor& t) { return t.defined() ? t.data() : nullptr; }

// Product of the dims before the last: the rows of a [.., C] tensor viewed as a matrix (also
// right when C is 0, unlike numel() / C).
inline int64_t leading_rows(const Shape& s) {
  int64_t rows = 1;
  for (int i = 0; i + 1 < s.rank(); ++i) rows *= s[i];
  return rows;
}

}  // namespace headlab::detail
