#pragma once
// NumPy broadcasting, shared by the binary ops, expand, where and masked_fill (internal to
// autograd; not part of the public API).

#include <algorithm>
#include <array>
#include <cstdint>

#include "autograd/var.h"
#include "core/error.h"

namespace headlab::detail {

// NumPy's broadcast shape of a and b (dims aligned from the back; each pair equal or one of them
// 1), or throws naming the op and both shapes.
inline Shape broadcast_shape(const char* op, const Shape& a, const Shape& b) {
  const int rank = std::max(a.rank(), b.rank());
  std::array<int64_t, Shape::kMaxRank> dims{};
  for (int i = 1; i <= rank; ++i) {
    const int64_t da = i <= a.rank() ? a[-i] : 1, db = i <= b.rank() ? b[-i] : 1;
    if (da != db && da != 1 && db != 1)
      fail("{}: shapes {} and {} do not broadcast (dim -{}: {} vs {}; expected equal or 1)", op,
           a.str(), b.str(), i, da, db);
    dims[static_cast<size_t>(rank - i)] = da == 1 ? db : da;
  }
  return Shape(dims.begin(), dims.begin() + rank);
}

// For every element j of `out` (row-major), calls f(j, i) with i the element of x [in] it reads
// when x is broadcast to out (a stride of 0 along the dims where x has size 1 or none). `in`
// must broadcast to `out` (rank <= out's, each dim equal to out's or 1).
template <class F>
void for_broadcast(const Shape& in, const Shape& out, F f) {
  const int rank = out.rank(), shift = out.rank() - in.rank();
  std::array<int64_t, Shape::kMaxRank> stride{}, index{};
  int64_t s = 1;
  for (int k = rank - 1; k >= shift; --k) {
    stride[k] = in[k - shift] == 1 ? 0 : s;
    s *= in[k - shift];
  }
  const int64_t n = out.numel();
  int64_t offset = 0;
  for (int64_t j = 0; j < n; ++j) {
    f(j, offset);
    for (int k = rank - 1; k >= 0; --k) {  // odometer over out's index
      offset += stride[k];
      if (++index[k] < out[k]) break;
      offset -= stride[k] * out[k];
      index[k] = 0;
    }
  }
}

// x repeated to `shape` (a copy), recorded under the op's name: backward sums g over the
// repeats into x's gradient. x's shape must broadcast to `shape` (ops_elementwise.cpp).
Var broadcast_to(const char* op, const Var& x, const Shape& shape);

}  // namespace headlab::detail
