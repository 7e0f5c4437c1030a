#include "autograd/packed_params.h"

#include <algorithm>

#include "core/error.h"

namespace headlab::packed {
namespace {

template <class Get>
bool adjacent(std::span<const Var> parts, Get get) {
  for (size_t i = 0; i < parts.size(); ++i) {
    if (!parts[i].defined() || !get(parts[i]).defined()) return false;
    if (i == 0) continue;
    const Tensor& a = get(parts[i - 1]);
    const Tensor& b = get(parts[i]);
    if (!a.shares_storage(b) || a.data() + a.numel() != b.data()) return false;
  }
  return true;
}

// A buffer [sum rows_i, ..] shaped like the parts stacked along dim 0.
Tensor stacked_buffer(std::span<const Var> parts) {
  Shape shape = parts[0].shape();
  shape[0] = 0;
  for (const Var& v : parts) shape[0] += v.size(0);
  return Tensor::empty(shape);
}

}  // namespace

bool values_packed(std::span<const Var> parts) {
  return adjacent(parts, [](const Var& v) -> const Tensor& { return v.value(); });
}

bool grads_packed(std::span<const Var> parts) {
  return adjacent(parts, [](const Var& v) -> const Tensor& { return v.grad(); });
}

void pack_values(std::span<const Var> parts) {
  HEADLAB_ASSERT(!parts.empty());
  Tensor buffer = stacked_buffer(parts);
  int64_t row = 0;
  for (const Var& v : parts) {
    Tensor block = buffer.slice(row, row + v.size(0));
    block.copy_(v.value());
    v.value() = block;
    row += v.size(0);
  }
}

bool ensure_values_packed(std::span<const Var> parts) {
  if (values_packed(parts)) return false;
  pack_values(parts);
  return true;
}

grad::Target grad_target(std::span<const Var> parts) {
  if (parts.empty() || !std::all_of(parts.begin(), parts.end(), grad::wanted)) return {};
  if (grads_packed(parts)) return {parts[0].grad().data(), true};
  if (!values_packed(parts)) return {};
  // First contribution (no part has a gradient: write), or a re-pack of gradients that were
  // reassigned or cleared (their values kept, cleared ones zero: accumulate).
  const bool fresh =
      std::none_of(parts.begin(), parts.end(), [](const Var& v) { return v.has_grad(); });
  Tensor buffer = stacked_buffer(parts);
  int64_t row = 0;
  for (const Var& v : parts) {
    Tensor block = buffer.slice(row, row + v.size(0));
    if (!fresh) {
      if (v.has_grad())
        block.copy_(v.grad());
      else
        block.zero_();
    }
    v.grad() = block;
    row += v.size(0);
  }
  return {buffer.data(), !fresh};
}

}  // namespace headlab::packed
