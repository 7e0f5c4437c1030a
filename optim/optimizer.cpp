#include "optim/optimizer.h"

#include <cmath>
#include <unordered_map>
#include <unordered_set>

#include "autograd/grad_mode.h"
#include "autograd/profile.h"
#include "core/error.h"
#include "layers/qkv_state.h"

namespace headlab {

namespace {
constexpr int64_t kStepRadix = int64_t{1} << 24;  // fp32 holds every integer below 2^24 exactly
}  // namespace

Optimizer::Optimizer(NamedParameters params, double lr, std::vector<std::string> state_names)
    : params_(std::move(params)), state_names_(std::move(state_names)), lr_(0.0) {
  if (params_.empty()) fail("optimizer: the parameter list is empty");
  std::unordered_map<std::string, size_t> names;
  std::unordered_map<const void*, size_t> nodes;
  for (size_t i = 0; i < params_.size(); ++i) {
    const NamedParameter& p = params_[i];
    if (!p.var.defined()) fail("optimizer: parameter '{}' is an undefined Var", p.name);
    if (!names.emplace(p.name, i).second) fail("optimizer: parameter name '{}' repeats", p.name);
    auto [it, fresh] = nodes.emplace(p.var.node(), i);
    if (!fresh)
      fail("optimizer: parameters '{}' and '{}' are the same Var (it would be updated twice)",
           params_[it->second].name, p.name);
  }
  state_.assign(params_.size(), std::vector<Tensor>(state_names_.size()));
  groups_.assign(params_.size(), ParameterGroup{});
  owned_.assign(params_.size(), true);
  // name() is not callable yet (pure virtual during construction).
  check_lr("optimizer", lr);
  lr_ = lr;
}

void Optimizer::check_lr(const char* who, double lr) {
  if (!std::isfinite(lr) || lr < 0.0) fail("{}: lr is {} but expected finite and >= 0", who, lr);
}

void Optimizer::set_lr(double lr) {
  check_lr(name(), lr);
  lr_ = lr;
}

void Optimizer::set_parameter_groups(std::vector<ParameterGroup> groups) {
  if (groups.size() != params_.size())
    fail("{}: {} parameter groups given for {} parameters", name(), groups.size(), params_.size());
  for (size_t i = 0; i < groups.size(); ++i)
    if (!std::isfinite(groups[i].lr_scale) || groups[i].lr_scale < 0.0)
      fail("{}: parameter '{}' has lr_scale {} but expected finite and >= 0", name(),
           params_[i].name, groups[i].lr_scale);
  groups_ = std::move(groups);
}

void Optimizer::set_owned(std::vector<bool> owned) {
  if (owned.size() != params_.size())
    fail("{}: {} ownership flags given for {} parameters", name(), owned.size(), params_.size());
  owned_ = std::move(owned);
  for (size_t i = 0; i < params_.size(); ++i)
    if (!owned_[i])
      for (Tensor& s : state_[i]) s = Tensor();
}

int64_t Optimizer::state_bytes() const {
  int64_t bytes = 0;
  for (const auto& slots : state_)
    for (const Tensor& s : slots)
      if (s.defined()) bytes += s.numel() * static_cast<int64_t>(sizeof(float));
  return bytes;
}

void Optimizer::set_step_count(int64_t step) {
  if (step < 0) fail("{}: step count is {} but expected >= 0", name(), step);
  step_ = step;
}

void Optimizer::step() {
  ProfileRegion region("optimizer.step");
  NoGradGuard no_grad;
  ++step_;
  begin_step();
  for (size_t i = 0; i < params_.size(); ++i) {
    const Var& var = params_[i].var;
    if (!owned_[i] || !var.has_grad()) continue;
    Tensor& value = var.value();
    const Tensor& grad = var.grad();
    HEADLAB_ASSERT(grad.shape() == value.shape());
    std::vector<Tensor>& slots = state_[i];
    for (Tensor& s : slots)
      if (!s.defined()) s = Tensor::zeros(value.shape());
    lr_scale_ = groups_[i].lr_scale;
    decays_ = groups_[i].weight_decay;
    update_parameter(value, grad, slots);
  }
  lr_scale_ = 1.0;
  decays_ = true;
}

void Optimizer::zero_grad() {
  ProfileRegion region("optimizer.zero_grad");
  for (const auto& p : params_) p.var.zero_grad();
}

Tensor Optimizer::step_to_tensor(int64_t step) {
  HEADLAB_ASSERT(step >= 0 && step / kStepRadix < kStepRadix);
  return Tensor::from(
      {2}, {static_cast<float>(step / kStepRadix), static_cast<float>(step % kStepRadix)});
}

int64_t Optimizer::step_from_tensor(const Tensor& t, const char* what) {
  if (!t.defined() || t.shape() != Shape{2})
    fail("{}: expected a [2] tensor {{step / 2^24, step % 2^24}} but got shape {}", what,
         t.defined() ? t.shape().str() : "undefined");
  const float hi = t[0], lo = t[1];
  const bool integral =
      std::isfinite(hi) && std::isfinite(lo) && hi == std::floor(hi) && lo == std::floor(lo);
  if (!integral || hi < 0 || lo < 0 || lo >= static_cast<float>(kStepRadix) ||
      hi >= static_cast<float>(kStepRadix))
    fail("{}: holds {{{}, {}}} but expected two non-negative integers below 2^24", what, hi, lo);
  return static_cast<int64_t>(hi) * kStepRadix + static_cast<int64_t>(lo);
}

StateDict Optimizer::state_dict() const {
  StateDict out;
  out.reserve(state_names_.size() * params_.size() + 1);
  for (size_t k = 0; k < state_names_.size(); ++k)
    for (size_t i = 0; i < params_.size(); ++i) {
      const Tensor& s = state_[i][k];
      out.push_back({state_names_[k] + "." + params_[i].name,
                     s.defined() ? s : Tensor::zeros(params_[i].var.shape())});
    }
  out.push_back({"step", step_to_tensor(step_)});
  return out;
}

void Optimizer::load_state_dict(const StateDict& stored) {
  // Moments saved before in_proj_weight are keyed by its row blocks' old names
  // ("exp_avg.<layer>.w_q.weight", ...): stacked like the model's (layers/qkv_state.h).
  std::unordered_set<std::string> expected;
  for (const std::string& slot : state_names_)
    for (const auto& p : params_) expected.insert(slot + "." + p.name);
  const StateDict state =
      stack_legacy_qkv(stored, [&](const std::string& name) { return expected.count(name) > 0; });
  std::unordered_map<std::string, const Tensor*> given;
  std::string problems;
  int count = 0;
  auto add = [&](const std::string& p) { problems += (count++ ? "; " : "") + p; };
  for (const auto& t : state)
    if (!given.emplace(t.name, &t.tensor).second) add("'" + t.name + "' appears twice");

  std::unordered_set<std::string> known{"step"};
  for (size_t k = 0; k < state_names_.size(); ++k)
    for (size_t i = 0; i < params_.size(); ++i) {
      const NamedParameter& p = params_[i];
      const std::string key = state_names_[k] + "." + p.name;
      known.insert(key);
      auto it = given.find(key);
      if (it == given.end()) {
        if (owned_[i]) add("missing '" + key + "'");
      } else if (it->second->shape() != p.var.shape())
        add("'" + key + "' has shape " + it->second->shape().str() + " but parameter '" + p.name +
            "' has shape " + p.var.shape().str());
    }
  int64_t step = 0;
  if (auto it = given.find("step"); it == given.end()) {
    add("missing 'step'");
  } else {
    try {
      step = step_from_tensor(*it->second, "'step'");
    } catch (const Error& e) {
      add(e.what());
    }
  }
  for (const auto& t : state)
    if (!known.count(t.name)) add("unexpected '" + t.name + "'");
  if (count > 0)
    fail("{}: load_state_dict: {} problem{}: {}", name(), count, count == 1 ? "" : "s", problems);

  for (size_t k = 0; k < state_names_.size(); ++k)
    for (size_t i = 0; i < params_.size(); ++i) {
      if (!owned_[i]) continue;  // its owner keeps it (set_owned)
      Tensor& s = state_[i][k];
      if (!s.defined()) s = Tensor::empty(params_[i].var.shape());
      s.copy_(*given.at(state_names_[k] + "." + params_[i].name));
    }
  step_ = step;
}

}  // namespace headlab
