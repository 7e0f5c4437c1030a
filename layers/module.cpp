#include "layers/module.h"

#include <unordered_map>
#include <unordered_set>

#include "autograd/ops.h"
#include "core/error.h"
#include "layers/hooks.h"
#include "layers/qkv_state.h"

namespace headlab {

Var SequenceLayer::forward_sum(const Var& x, const Var& r) {
  return forward(add(x, r));
}

Var Module::register_parameter(std::string name, Tensor init) {
  for (const auto& p : parameters_)
    if (p.name == name) fail("register_parameter: '{}' is already registered", name);
  Var v(std::move(init), true);
  parameters_.push_back({std::move(name), v});
  return v;
}

void Module::add_child(std::string name, std::shared_ptr<Module> module) {
  if (!module) fail("register_module: '{}' is null", name);
  for (const auto& c : children_)
    if (c.first == name) fail("register_module: '{}' is already registered", name);
  children_.emplace_back(std::move(name), std::move(module));
}

void Module::collect(const std::string& prefix, NamedParameters& out) const {
  for (const auto& p : parameters_) out.push_back({prefix + p.name, p.var});
  for (const auto& [name, child] : children_) child->collect(prefix + name + ".", out);
}

NamedParameters Module::named_parameters() const {
  NamedParameters out;
  collect("", out);
  return out;
}

std::vector<Var> Module::parameters() const {
  std::vector<Var> out;
  for (auto& p : named_parameters()) out.push_back(p.var);
  return out;
}

std::vector<std::pair<std::string, Module*>> Module::named_children() const {
  std::vector<std::pair<std::string, Module*>> out;
  for (const auto& [name, child] : children_) out.emplace_back(name, child.get());
  return out;
}

void Module::attach_hooks(Hooks* hooks, const std::string& prefix) {
  hooks_ = hooks;
  hook_prefix_ = prefix;
  for (auto& [name, child] : children_) child->attach_hooks(hooks, prefix + name + ".");
}

Var Module::apply_hook(std::string_view point, const Var& x) {
  return hooks_->apply(hook_prefix_ + std::string(point), x);
}

bool Module::hooked(std::string_view point) const {
  return hooks_ && hooks_->wants(hook_prefix_ + std::string(point));
}

bool Module::hook_edited(std::string_view point) const {
  return hooks_ && hooks_->edits(hook_prefix_ + std::string(point));
}

const Tensor* Module::hook_start(std::string_view point) const {
  return hooks_ && hooks_->has_starts() ? hooks_->start(hook_prefix_ + std::string(point))
                                        : nullptr;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& c : children_) c.second->train(on);
}

void Module::set_dropout(bool on) {
  dropout_ = on;
  for (auto& c : children_) c.second->set_dropout(on);
}

void Module::zero_grad() {
  for (auto& p : named_parameters()) p.var.zero_grad();
}

StateDict Module::state_dict() const {
  StateDict out;
  for (auto& p : named_parameters()) out.push_back({p.name, p.var.value()});
  return out;
}

void Module::load_state_dict(const StateDict& stored) {
  const NamedParameters params = named_parameters();
  std::unordered_set<std::string> known;
  for (const auto& p : params) known.insert(p.name);
  // A state from before in_proj_weight names its row blocks w_q, w_k, w_v (layers/qkv_state.h).
  const StateDict state =
      stack_legacy_qkv(stored, [&](const std::string& name) { return known.count(name) > 0; });
  std::unordered_map<std::string, const Tensor*> given;
  for (const auto& t : state) given.emplace(t.name, &t.tensor);
  std::string problems;
  int count = 0;
  auto add = [&](const std::string& p) { problems += (count++ ? "; " : "") + p; };
  for (const auto& p : params) {
    auto it = given.find(p.name);
    if (it == given.end()) {
      add("missing '" + p.name + "'");
    } else if (it->second->shape() != p.var.shape()) {
      add("'" + p.name + "' has shape " + it->second->shape().str() + " but the model expects " +
          p.var.shape().str());
    }
  }
  for (const auto& t : state)
    if (!known.count(t.name)) add("unexpected '" + t.name + "'");
  if (count > 0) fail("load_state_dict: {} problem{}: {}", count, count == 1 ? "" : "s", problems);
  for (const auto& p : params) p.var.value().copy_(*given.at(p.name));
}

}  // namespace headlab
