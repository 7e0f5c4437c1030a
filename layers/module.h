#pragma once
// Module: the base of every layer. A layer registers its parameters and sub-layers under their
// member names, so named_parameters() yields stable dotted names
// ("encoder.layers.0.attn.in_proj_weight") that checkpoints and optimizer state key on. Layers
// write no serialization code: state_dict()/load_state_dict() work from the registrations.

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autograd/var.h"
#include "core/state_dict.h"

namespace headlab {

struct NamedParameter {
  std::string name;
  Var var;
};
using NamedParameters = std::vector<NamedParameter>;

class Module {
 public:
  Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  virtual ~Module() = default;

  // Every parameter of this module and its children, depth first in registration order, named
  // by the dotted path of member names.
  NamedParameters named_parameters() const;
  std::vector<Var> parameters() const;
  std::vector<std::pair<std::string, Module*>> named_children() const;

  // Training mode (dropout active) for this module and all children.
  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  // Zeroes every parameter's gradient.
  void zero_grad();

  // Parameter values by name (tensors alias the parameters; clone to snapshot).
  StateDict state_dict() const;
  // Copies values in by name. Collects every missing, unexpected or mis-shaped name, then throws
  // one headlab::Error listing them all (nothing is modified in that case). Attention weights
  // saved under their older names (w_q, w_k, w_v) are stacked first (layers/qkv_state.h).
  void load_state_dict(const StateDict& state);

 protected:
  // Registers a parameter (requires_grad) initialised to `init`; returns its Var.
  Var register_parameter(std::string name, Tensor init);
  // Registers a child module; returns it for assignment to the member of the same name.
  template <class M>
  std::shared_ptr<M> register_module(std::string name, std::shared_ptr<M> module) {
    add_child(std::move(name), module);
    return module;
  }

 private:
  void add_child(std::string name, std::shared_ptr<Module> module);
  void collect(const std::string& prefix, NamedParameters& out) const;

  NamedParameters parameters_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
};

// A layer that maps one sequence to another of the same kind: x [.., D] -> [.., D'] (norms,
// feed-forward blocks, Linear, Dropout, Softmax, positional encodings). The encoder's norm and
// ffn slots hold SequenceLayers built by the registry (layers/registry.h); a user's layer only
// needs to derive from this and implement forward.
class SequenceLayer : public Module {
 public:
  virtual Var forward(const Var& x) = 0;
  Var operator()(const Var& x) { return forward(x); }
  // forward(x + r): the post-norm encoder's "norm of the residual sum". A layer that can fuse
  // the addition into its own kernel overrides this (LayerNorm does).
  virtual Var forward_sum(const Var& x, const Var& r);
};

}  // namespace headlab
