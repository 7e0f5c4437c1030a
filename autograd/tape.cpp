#include "autograd/tape.h"

#include "autograd/grad.h"
#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "core/error.h"

namespace headlab {

Tape::~Tape() {
  clear();
}

namespace {
thread_local Tape* g_scoped_tape = nullptr;  // set by TapeScope
}

Tape& Tape::current() {
  if (g_scoped_tape != nullptr) return *g_scoped_tape;
  thread_local Tape tape;
  return tape;
}

TapeScope::TapeScope(Tape& tape) : previous_(g_scoped_tape) {
  g_scoped_tape = &tape;
}
TapeScope::~TapeScope() {
  g_scoped_tape = previous_;
}

void Tape::record(const char* op, const Var& output, Backward backward) {
  HEADLAB_ASSERT(output.tape() == this);
  entries_.push_back(Entry{op, output, std::move(backward)});
}

void Tape::note_leaf_use(const Var& leaf) {
  detail::Node* n = leaf.node_;
  if (n->use_tape == this && n->use_generation == generation_) return;
  n->use_tape = this;
  n->use_generation = generation_;
  leaf_uses_.push_back(LeafUse{entries_.size(), leaf});
}

void Tape::backward(const Var& root, const Tensor* seed, const LeafDone* leaf_done) {
  detail::Node* node = root.node_;
  if (!root.requires_grad())
    fail(
        "backward: the value does not require a gradient (no input with requires_grad reaches it)");
  if (node->tape != this) fail("backward: the value belongs to another tape");
  if (node->generation != generation_)
    fail(
        "backward: the tape holding this value was already cleared (backward called twice on one "
        "forward pass?)");
  if (seed == nullptr) {
    if (root.numel() != 1)
      fail("backward: output of shape {} is not a scalar; pass a seed gradient of that shape",
           root.shape().str());
    grad::add(root, [](Tensor& g) { g.fill_(1.0f); });
  } else {
    check_shape("backward", "seed gradient", seed->shape(), root.shape());
    grad::add(root, [seed](Tensor& g) { g.copy_(*seed); });
  }
  // Leaves whose first use is at or after entry i are final once entry i has run.
  size_t unnamed = leaf_done != nullptr ? leaf_uses_.size() : 0;
  const auto name_final = [&](size_t i) {
    while (unnamed > 0 && leaf_uses_[unnamed - 1].entry >= i)
      (*leaf_done)(leaf_uses_[--unnamed].leaf);
  };
  for (size_t i = entries_.size(); i-- > 0;) {
    Entry& e = entries_[i];
    if (e.output.has_grad()) {
      profile_event(ProfileEvent::backward_begin, e.op);
      e.backward(e.output.grad());
      profile_event(ProfileEvent::backward_end, e.op);
    }
    name_final(i);
  }
  name_final(0);
  clear();
}

void Tape::clear() {
  entries_.clear();  // keeps capacity: the next step records without reallocating
  leaf_uses_.clear();
  ++generation_;
}

Var make_output(const char* op, const Shape& shape, std::initializer_list<const Var*> inputs) {
  Tape* tape = nullptr;
  bool needs_grad = false;
  for (const Var* in : inputs) {
    if (!in->requires_grad()) continue;  // also an undefined (absent optional) input
    needs_grad = true;
    Tape* t = in->tape();
    if (t == nullptr) continue;
    if (in->generation() != t->generation())
      fail("{}: an input was recorded on a tape that has since been cleared; recompute it", op);
    if (tape != nullptr && tape != t) fail("{}: inputs live on different tapes", op);
    tape = t;
  }
  needs_grad = needs_grad && grad_enabled();
  Var out(Tensor::empty(shape), false);
  if (needs_grad) {
    if (tape == nullptr) tape = &Tape::current();
    out.node_->requires_grad = true;
    out.node_->tape = tape;
    out.node_->generation = tape->generation();
    for (const Var* in : inputs)
      if (in->requires_grad() && in->tape() == nullptr) tape->note_leaf_use(*in);
  }
  return out;
}

}  // namespace headlab
