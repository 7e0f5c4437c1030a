// Reductions and shape ops. sum and mean spread their scalar gradient over every element
// (times 1/n for mean); reshape passes the gradient through unchanged; transpose, split_heads
// and merge_heads are permutations, so their backward is the inverse permutation of g. concat
// and slice copy blocks: with x viewed as [outer, n, inner] around the dim, a block is the
// columns [begin, end) of n in every outer row, and backward moves the same block of g back.

#include <algorithm>
#include <array>

#include <fmt/format.h>

#include "autograd/grad.h"
#include "autograd/ops.h"
#include "autograd/ops_internal.h"
#include "autograd/tape.h"
#include "core/elementwise.h"
#include "core/error.h"

namespace headlab {

Var sum(const Var& x) {
  constexpr const char* kOp = "sum";
  detail::check_defined(kOp, x);
  Var out = make_output(kOp, Shape{1}, {&x});
  out.value()[0] = static_cast<float>(ew::sum(x.value().data(), x.numel()));
  record(kOp, out, [x](const Tensor& g) {
    const float g0 = g[0];
    grad::add(x, [g0](Tensor& dx) { dx.fill_(g0); });
  });
  return out;
}

Var mean(const Var& x) {
  constexpr const char* kOp = "mean";
  detail::check_defined(kOp, x);
  const int64_t n = x.numel();
  if (n == 0) fail("{}: input of shape {} has no elements", kOp, x.shape().str());
  Var out = make_output(kOp, Shape{1}, {&x});
  out.value()[0] = static_cast<float>(ew::sum(x.value().data(), n) / static_cast<double>(n));
  record(kOp, out, [x, n](const Tensor& g) {
    const float g0 = static_cast<float>(g[0] / static_cast<double>(n));
    grad::add(x, [g0](Tensor& dx) { dx.fill_(g0); });
  });
  return out;
}

Var reshape(const Var& x, const Shape& shape) {
  constexpr const char* kOp = "reshape";
  detail::check_defined(kOp, x);
  if (shape.numel() != x.numel())
    fail("{}: cannot reshape {} to {} (numel {} vs {})", kOp, x.shape().str(), shape.str(),
         x.numel(), shape.numel());
  Var out = make_output(kOp, shape, {&x});
  out.value() = x.value().view(shape, kOp);  // shares x's storage, as a view
  record(kOp, out, [x](const Tensor& g) { grad::add(x, g); });
  return out;
}

Var transpose(const Var& x) {
  constexpr const char* kOp = "transpose";
  detail::check_defined(kOp, x);
  if (x.rank() < 2)
    fail("{}: input must have at least 2 dims but has shape {}", kOp, x.shape().str());
  Shape shape = x.shape();
  const int64_t m = shape[-2];
  const int64_t n = shape[-1];
  int64_t batch = 1;
  for (int i = 0; i < shape.rank() - 2; ++i) batch *= shape[i];
  shape[-2] = n;
  shape[-1] = m;
  Var out = make_output(kOp, shape, {&x});
  ew::swap_middle_dims(x.value().data(), batch, m, n, 1, out.value().data());
  record(kOp, out, [x, batch, m, n](const Tensor& g) {
    grad::add(x, [&](Tensor& dx) { ew::swap_middle_dims(g.data(), batch, n, m, 1, dx.data()); });
  });
  return out;
}

Var split_heads(const Var& x, int64_t heads) {
  constexpr const char* kOp = "split_heads";
  detail::check_defined(kOp, x);
  if (x.rank() != 3) fail("{}: input must be [B, T, h*d] but has shape {}", kOp, x.shape().str());
  if (heads < 1 || x.size(2) % heads != 0)
    fail("{}: heads = {} does not divide the last dim of {}", kOp, heads, x.shape().str());
  const int64_t b = x.size(0), t = x.size(1), d = x.size(2) / heads;
  Var out = make_output(kOp, Shape{b, heads, t, d}, {&x});
  // [B, T, h, d] -> [B, h, T, d]
  ew::swap_middle_dims(x.value().data(), b, t, heads, d, out.value().data());
  record(kOp, out, [x, b, t, heads, d](const Tensor& g) {
    grad::add(x, [&](Tensor& dx) { ew::swap_middle_dims(g.data(), b, heads, t, d, dx.data()); });
  });
  return out;
}

Var merge_heads(const Var& x) {
  constexpr const char* kOp = "merge_heads";
  detail::check_defined(kOp, x);
  if (x.rank() != 4) fail("{}: input must be [B, h, T, d] but has shape {}", kOp, x.shape().str());
  const int64_t b = x.size(0), h = x.size(1), t = x.size(2), d = x.size(3);
  Var out = make_output(kOp, Shape{b, t, h * d}, {&x});
  // [B, h, T, d] -> [B, T, h, d]
  ew::swap_middle_dims(x.value().data(), b, h, t, d, out.value().data());
  record(kOp, out, [x, b, h, t, d](const Tensor& g) {
    grad::add(x, [&](Tensor& dx) { ew::swap_middle_dims(g.data(), b, t, h, d, dx.data()); });
  });
  return out;
}

namespace {

// Copies, for every outer row, `width` x inner values from src (row stride src_n x inner) at
// column src_at to dst (row stride dst_n x inner) at column dst_at; adds instead when add.
void copy_block(const float* src, int64_t src_n, int64_t src_at, float* dst, int64_t dst_n,
                int64_t dst_at, int64_t width, const detail::AroundDim& a, bool add) {
  const int64_t len = width * a.inner;
  for (int64_t o = 0; o < a.outer; ++o) {
    const float* from = src + (o * src_n + src_at) * a.inner;
    float* to = dst + (o * dst_n + dst_at) * a.inner;
    if (add)
      ew::axpy(from, len, 1.0f, to);
    else
      std::copy_n(from, len, to);
  }
}

}  // namespace

Var concat(std::span<const Var> xs, int dim) {
  constexpr const char* kOp = "concat";
  if (xs.empty() || xs.size() > kMaxConcat)
    fail("{}: {} inputs given but expected 1 to {}", kOp, xs.size(), kMaxConcat);
  std::array<Var, kMaxConcat> in;  // undefined beyond xs.size(): make_output skips them
  for (size_t i = 0; i < xs.size(); ++i) {
    detail::check_defined(kOp, xs[i]);
    in[i] = xs[i];
  }
  const int d = detail::normalize_dim(kOp, dim, xs[0].shape());
  Shape shape = xs[0].shape();
  std::array<int64_t, kMaxConcat> widths{};
  shape[d] = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    Shape s = xs[i].shape();
    bool ok = s.rank() == shape.rank();
    for (int j = 0; ok && j < s.rank(); ++j) ok = j == d || s[j] == shape[j];
    if (!ok)
      fail("{}: input {} has shape {} but input 0 has {}: only dim {} may differ", kOp, i, s.str(),
           xs[0].shape().str(), dim);
    widths[i] = s[d];
    shape[d] += s[d];
  }
  Var out =
      make_output(kOp, shape, {&in[0], &in[1], &in[2], &in[3], &in[4], &in[5], &in[6], &in[7]});
  const detail::AroundDim a = detail::around_dim(shape, d);
  for (size_t i = 0, at = 0; i < xs.size(); at += static_cast<size_t>(widths[i]), ++i)
    copy_block(in[i].value().data(), widths[i], 0, out.value().data(), a.n,
               static_cast<int64_t>(at), widths[i], a, false);

  const size_t count = xs.size();
  record(kOp, out, [in, widths, count, a](const Tensor& g) {
    for (size_t i = 0, at = 0; i < count; at += static_cast<size_t>(widths[i]), ++i)
      grad::add(in[i], [&](Tensor& dx) {
        copy_block(g.data(), a.n, static_cast<int64_t>(at), dx.data(), widths[i], 0, widths[i], a,
                   false);
      });
  });
  return out;
}

Var slice(const Var& x, int dim, int64_t begin, int64_t end) {
  constexpr const char* kOp = "slice";
  detail::check_defined(kOp, x);
  const int d = detail::normalize_dim(kOp, dim, x.shape());
  const int64_t n = x.size(d);
  if (begin < 0 || begin > end || end > n)
    fail("{}: [{}, {}) is not a range of dim {} of shape {} (expected 0 <= begin <= end <= {})",
         kOp, begin, end, dim, x.shape().str(), n);
  Shape shape = x.shape();
  shape[d] = end - begin;
  Var out = make_output(kOp, shape, {&x});
  const detail::AroundDim a = detail::around_dim(x.shape(), d);
  copy_block(x.value().data(), n, begin, out.value().data(), end - begin, 0, end - begin, a, false);

  record(kOp, out, [x, a, begin, end](const Tensor& g) {
    // The block of x's gradient outside [begin, end) gets nothing: zero it when fresh.
    const grad::Target t = grad::target(x);
    if (!t) return;
    if (!t.accumulate) std::fill_n(t.data, x.numel(), 0.0f);
    copy_block(g.data(), end - begin, 0, t.data, a.n, begin, end - begin, a, true);
  });
  return out;
}

}  // namespace headlab

namespace headlab {
namespace {

// out[j] = x[i] for out index (j_0 .. j_r) and x index i_{perm[k]} = j_k: a walk over out with
// x's strides taken in out's order.
void permute_copy(const float* x, const Shape& in, const std::array<int, Shape::kMaxRank>& perm,
                  float* out) {
  const int rank = in.rank();
  std::array<int64_t, Shape::kMaxRank> in_stride{}, stride{}, size{}, index{};
  int64_t s = 1;
  for (int k = rank - 1; k >= 0; --k) {
    in_stride[k] = s;
    s *= in[k];
  }
  int64_t n = 1;
  for (int k = 0; k < rank; ++k) {
    stride[k] = in_stride[perm[k]];
    size[k] = in[perm[k]];
    n *= size[k];
  }
  int64_t offset = 0;
  for (int64_t j = 0; j < n; ++j) {
    out[j] = x[offset];
    for (int k = rank - 1; k >= 0; --k) {  // odometer over out's index
      offset += stride[k];
      if (++index[k] < size[k]) break;
      offset -= stride[k] * size[k];
      index[k] = 0;
    }
  }
}

}  // namespace

Var permute(const Var& x, std::span<const int> dims) {
  constexpr const char* kOp = "permute";
  detail::check_defined(kOp, x);
  const Shape& in = x.shape();
  const int rank = in.rank();
  const auto bad = [&] {
    fail("{}: dims [{}] must be a permutation of the {} dims of shape {}", kOp,
         fmt::join(dims, ", "), rank, in.str());
  };
  if (static_cast<int>(dims.size()) != rank) bad();
  std::array<int, Shape::kMaxRank> perm{}, inverse{};
  std::array<bool, Shape::kMaxRank> seen{};
  Shape shape;
  for (int k = 0; k < rank; ++k) {
    const int d = dims[static_cast<size_t>(k)] < 0 ? dims[static_cast<size_t>(k)] + rank
                                                   : dims[static_cast<size_t>(k)];
    if (d < 0 || d >= rank || seen[d]) bad();
    seen[d] = true;
    perm[k] = d;
    inverse[d] = k;
    shape.push_back(in[d]);
  }
  Var out = make_output(kOp, shape, {&x});
  permute_copy(x.value().data(), in, perm, out.value().data());
  record(kOp, out, [x, shape, inverse](const Tensor& g) {
    grad::add(x, [&](Tensor& dx) { permute_copy(g.data(), shape, inverse, dx.data()); });
  });
  return out;
}

}  // namespace headlab
