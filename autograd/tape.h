#pragma once
// Tape: the record of one forward pass, replayed backward once.
//
// Each differentiable op appends one entry (its name, its output and a backward closure written
// beside the op's forward). backward() seeds the root's gradient and calls the entries in
// reverse; each closure receives its output's gradient and accumulates (+=) into the gradients
// of the inputs that need one. Entries whose output received no gradient are skipped. The tape
// is then cleared; its entry storage and every buffer it held are reused by the next step, so
// a step of fixed shapes allocates nothing after warm-up.

#include <cstdint>
#include <functional>
#include <vector>

#include "autograd/inplace_function.h"
#include "autograd/profile.h"
#include "autograd/var.h"

namespace headlab {

// Called during a backward with each leaf (a parameter, or data that requires a gradient) as
// soon as its gradient is final (Tape::backward).
using LeafDone = std::function<void(const Var& leaf)>;

class Tape {
 public:
  // Backward closure: receives the output's gradient. 256 bytes hold any op's captures.
  using Backward = InplaceFunction<void(const Tensor& grad_out), 256>;

  Tape() = default;
  Tape(const Tape&) = delete;
  Tape& operator=(const Tape&) = delete;
  ~Tape();

  // This thread's current tape: ops whose inputs are all leaves record here. It is the
  // thread's own default tape unless a TapeScope is active.
  static Tape& current();

  void record(const char* op, const Var& output, Backward backward);
  // See Var::backward (root.tape()->backward(root, nullptr) is root.backward()). With leaf_done,
  // calls (*leaf_done)(leaf) for every leaf used on the tape, each once, right after the tape's
  // earliest entry that uses it has run (its gradient takes no more contributions) while the
  // rest of the backward is still to run; leaves whose entries never ran are named at the end.
  // A data-parallel step reduces the gradients that are final while the backward goes on
  // (train/distributed/reduce.h).
  void backward(const Var& root, const Tensor* seed, const LeafDone* leaf_done = nullptr);
  // Drops every entry (and the values only they kept alive); bumps the generation.
  void clear();

  size_t size() const { return entries_.size(); }
  const char* op_name(size_t i) const { return entries_.at(i).op; }
  // Incremented by every clear(); values of older generations can no longer be differentiated.
  uint64_t generation() const { return generation_; }

 private:
  friend Var make_output(const char*, const Shape&, std::initializer_list<const Var*>);

  struct Entry {
    const char* op;
    Var output;
    Backward backward;
  };
  // A leaf's first use in this recording: entry is the index the using op's entry takes (the
  // tape's size when the op prepared its output; an op that records others in between only
  // gets a later index, so the leaf is named no earlier than it is final).
  struct LeafUse {
    size_t entry;
    Var leaf;
  };
  // Notes `leaf` (a leaf that requires a gradient) as used by the op about to be recorded,
  // unless this recording already has it.
  void note_leaf_use(const Var& leaf);

  std::vector<Entry> entries_;
  std::vector<LeafUse> leaf_uses_;  // in order of entry
  uint64_t generation_ = 1;
};

// RAII: makes `tape` this thread's Tape::current() for its lifetime (scopes nest). Used for
// isolated recordings (gradcheck records on a private tape) and to hold several tapes at once.
// The tape must outlive the scope and every value recorded on it.
class TapeScope {
 public:
  explicit TapeScope(Tape& tape);
  ~TapeScope();
  TapeScope(const TapeScope&) = delete;
  TapeScope& operator=(const TapeScope&) = delete;

 private:
  Tape* previous_;
};

// Prepares an op's output: allocates a value of `shape` (uninitialised) and decides whether the
// op will be recorded (grad mode on and some input requires a gradient). Pass every input,
// optional ones included ({&x, &weight, &bias}): undefined Vars (an absent bias) are skipped, so
// an op checks its required inputs itself before reading them. All inputs that are recorded
// values must belong to the same, uncleared tape; otherwise throws naming `op`.
Var make_output(const char* op, const Shape& shape, std::initializer_list<const Var*> inputs);

// Records `backward` for `output` if make_output decided it needs a gradient. Either way the op's
// forward is done here (the profiling hook's forward_done, autograd/profile.h).
inline void record(const char* op, const Var& output, Tape::Backward backward) {
  profile_event(ProfileEvent::forward_done, op);
  if (output.requires_grad()) output.tape()->record(op, output, std::move(backward));
}

}  // namespace headlab
