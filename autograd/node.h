#pragma once
// The state behind a Var handle (internal to autograd).

#include <atomic>
#include <cstdint>

#include "core/tensor.h"

namespace headlab {
class Tape;
namespace detail {

struct Node {
  Tensor value;
  Tensor grad;
  bool requires_grad = false;
  Tape* tape = nullptr;  // null for leaves
  uint64_t generation = 0;
  // Leaves: the tape and generation whose use of this leaf was last noted (Tape::note_leaf_use),
  // so that a tape notes each leaf once, at its first use in the forward pass.
  const Tape* use_tape = nullptr;
  uint64_t use_generation = 0;
  std::atomic<int> refs{0};
};

Node* node_acquire();
void node_release(Node* n);

}  // namespace detail
}  // namespace headlab
