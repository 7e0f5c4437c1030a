#pragma once
// Var: a value in the autograd graph, a cheap reference-counted handle (copies alias).
//
// A leaf Var wraps data (requires_grad false) or a parameter (true). Every op output is a
// non-leaf Var that belongs to the tape its op was recorded on. Gradients accumulate in grad():
// parameters keep theirs across steps until zero_grad(); intermediate values lose theirs when
// the tape is cleared. Backward closures put their contributions in through autograd/grad.h.

#include <cstdint>

#include "core/tensor.h"

namespace headlab {

class Tape;
namespace detail {
struct Node;
}

class Var {
 public:
  Var() = default;
  explicit Var(Tensor value, bool requires_grad = false);
  Var(const Var& other);
  Var(Var&& other) noexcept;
  Var& operator=(Var other) noexcept;
  ~Var();

  bool defined() const { return node_ != nullptr; }
  // The value. Mutating it in place (an optimizer update) is allowed for leaves.
  Tensor& value() const;
  // The accumulated gradient; undefined (Tensor::defined() false) until one arrives.
  Tensor& grad() const;
  bool has_grad() const;
  bool requires_grad() const;
  bool is_leaf() const;
  const Shape& shape() const { return value().shape(); }
  int64_t size(int d) const { return value().size(d); }
  int rank() const { return value().rank(); }
  int64_t numel() const { return value().numel(); }

  // Leaves only: whether a gradient is wanted (data inputs in gradcheck, frozen parameters).
  void set_requires_grad(bool requires_grad) const;
  // Sets an existing gradient to zero (keeps the buffer); no-op without one.
  void zero_grad() const;
  // Drops the gradient buffer.
  void clear_grad() const;
  // A leaf that shares this value and needs no gradient.
  Var detach() const;

  // Reverse pass from this scalar (seed 1) or with an explicit seed of this shape; walks this
  // Var's tape once and clears it. Throws if the value is not a scalar (without seed), does not
  // require a gradient, or its tape was already cleared.
  void backward() const;
  void backward(const Tensor& seed) const;

  // The tape this value was recorded on, or null for leaves and values computed without grad.
  Tape* tape() const;
  uint64_t generation() const;
  const detail::Node* node() const { return node_; }

 private:
  friend class Tape;
  friend Var make_output(const char*, const Shape&, std::initializer_list<const Var*>);
  detail::Node* node_ = nullptr;
};

}  // namespace headlab
