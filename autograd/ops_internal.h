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

// A dimension index, negative counting from the back, as a position in [0, rank). Throws
// naming the op and the shape when it is outside.
inline int normalize_dim(const char* op, int dim, const Shape& shape) {
  const int rank = shape.rank();
  if (dim < -rank || dim >= rank)
    fail("{}: dim {} is outside the dims of shape {} (expected {} .. {})", op, dim, shape.str(),
         -rank, rank - 1);
  return dim < 0 ? dim + rank : dim;
}

// x viewed as [outer, n, inner] around dimension d (n = shape[d]).
struct AroundDim {
  int64_t outer = 1, n = 1, inner = 1;
};
inline AroundDim around_dim(const Shape& shape, int d) {
  AroundDim a;
  for (int i = 0; i < d; ++i) a.outer *= shape[i];
  a.n = shape[d];
  for (int i = d + 1; i < shape.rank(); ++i) a.inner *= shape[i];
  return a;
}

// The data of an optional input or buffer (a gain, a bias), or null when it is absent.
inline const float* data_or_null(const Var& v) {
  return v.defined() ? v.value().data() : nullptr;
}
inline float* data_or_null(Tensor& t) {
  return t.defined() ? t.data() : nullptr;
}

// Product of the dims before the last: the rows of a [.., C] tensor viewed as a matrix (also
// right when C is 0, unlike numel() / C).
inline int64_t leading_rows(const Shape& s) {
  int64_t rows = 1;
  for (int i = 0; i + 1 < s.rank(); ++i) rows *= s[i];
  return rows;
}

}  // namespace headlab::detail
