#pragma once
// Module: the base of every layer. A layer registers its parameters and sub-layers under their
// member names, so named_parameters() yields stable dotted names
// ("encoder.layers.0.attn.in_proj_weight") that checkpoints and optimizer state key on. Layers
// write no serialization code: state_dict()/load_state_dict() work from the registrations.

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "autograd/var.h"
#include "core/state_dict.h"

namespace headlab {

class Hooks;

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
  // Whether dropout may act in training mode, for this module and all children (default on).
  // Off, a training-mode forward drops nothing, as in eval mode, while training goes on: the
  // trainer's early dropout (model.dropout_steps) turns it off from a step on. A layer applies
  // its dropout when dropout_active(): training mode and dropout on.
  void set_dropout(bool on);
  bool dropout_active() const { return training_ && dropout_; }

  // Zeroes every parameter's gradient.
  void zero_grad();

  // Parameter values by name (tensors alias the parameters; clone to snapshot).
  StateDict state_dict() const;
  // Copies values in by name. Collects every missing, unexpected or mis-shaped name, then throws
  // one headlab::Error listing them all (nothing is modified in that case). Attention weights
  // saved under their older names (w_q, w_k, w_v) are stacked first (layers/qkv_state.h).
  void load_state_dict(const StateDict& state);

  // Hook points (layers/hooks.h): attaches `hooks` (null detaches) to this module, whose points
  // are then named prefix + point, and to its children, each under prefix + its name + ".". A
  // module whose children take other names in the hook vocabulary (the Encoder's "layers.0" is
  // "blocks.0", a block's "ffn" is "mlp") overrides this.
  virtual void attach_hooks(Hooks* hooks, const std::string& prefix);
  Hooks* attached_hooks() const { return hooks_; }

 protected:
  // The value of hook point `point` (named hook_prefix() + point) to go on with: x itself
  // when no hooks are attached (one null test) or none wants the point, else what the hooks
  // make of it (Hooks::apply).
  Var hook(std::string_view point, const Var& x) { return hooks_ ? apply_hook(point, x) : x; }
  // Whether an attached hook reads or edits `point` (a layer may take another path for it).
  bool hooked(std::string_view point) const;
  bool hook_edited(std::string_view point) const;
  // The value a forward starts with at `point` (Hooks::start_at), or null: a layer that gets one
  // may skip the work whose only use is that point's value, and pass the start through hook().
  const Tensor* hook_start(std::string_view point) const;
  const std::string& hook_prefix() const { return hook_prefix_; }

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
  Var apply_hook(std::string_view point, const Var& x);

  NamedParameters parameters_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
  bool dropout_ = true;
  Hooks* hooks_ = nullptr;
  std::string hook_prefix_;
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
