#include "layers/hooks.h"

#include "autograd/ops.h"
#include "core/error.h"
#include "layers/module.h"

namespace headlab {

void Hooks::cache(std::string name) {
  cache_requests_[std::move(name)] = true;
}

void Hooks::edit(std::string name, Edit edit) {
  if (!edit) fail("hooks: the edit at '{}' is empty", name);
  edits_[std::move(name)] = std::move(edit);
}

void Hooks::remove_edit(std::string_view name) {
  if (const auto it = edits_.find(name); it != edits_.end()) edits_.erase(it);
}

void Hooks::uncache(std::string_view name) {
  if (const auto it = cache_requests_.find(name); it != cache_requests_.end())
    cache_requests_.erase(it);
}

void Hooks::clear() {
  cache_requests_.clear();
  edits_.clear();
  starts_.clear();
  forget();
}

void Hooks::start_at(std::string name, Tensor value) {
  if (!value.defined()) fail("hooks: the start at '{}' has no value", name);
  starts_[std::move(name)] = std::move(value);
}

void Hooks::clear_starts() {
  starts_.clear();
}

std::vector<std::string> Hooks::start_names() const {
  std::vector<std::string> out;
  for (const auto& [name, value] : starts_) out.push_back(name);
  return out;
}

const Tensor* Hooks::start(std::string_view name) const {
  const auto it = starts_.find(name);
  return it == starts_.end() ? nullptr : &it->second;
}

bool Hooks::wants(std::string_view name) const {
  return cache_requests_.find(name) != cache_requests_.end() || edits(name) ||
         starts_.find(name) != starts_.end();
}

bool Hooks::edits(std::string_view name) const {
  return edits_.find(name) != edits_.end();
}

Var Hooks::apply(const std::string& name, const Var& computed) {
  seen_.push_back(name);
  Var x = computed;
  if (const auto s = starts_.find(name); s != starts_.end()) {
    if (s->second.shape() != computed.shape())
      fail("hooks: the start at '{}' has shape {} but the point's value is {}", name,
           s->second.shape().str(), computed.shape().str());
    x = Var(s->second);
  }
  if (cache_requests_.find(name) != cache_requests_.end()) values_[name] = x;
  const auto it = edits_.find(name);
  if (it == edits_.end()) return x;
  Var y = it->second(x);
  if (!y.defined()) fail("hooks: the edit at '{}' returned no value", name);
  if (y.shape() != x.shape())
    fail("hooks: the edit at '{}' returned shape {} but the point's value is {}", name,
         y.shape().str(), x.shape().str());
  return y;
}

const Var& Hooks::cached(std::string_view name) const {
  if (const auto it = values_.find(name); it != values_.end()) return it->second;
  std::string have;
  for (const auto& [n, v] : values_) have += (have.empty() ? "" : ", ") + n;
  fail("hooks: no value cached at '{}' (cached: {})", name, have.empty() ? "none" : have);
}

bool Hooks::has_cached(std::string_view name) const {
  return values_.find(name) != values_.end();
}

void Hooks::forget() {
  values_.clear();
  seen_.clear();
}

std::string block_hook(int64_t layer, std::string_view point) {
  return "blocks." + std::to_string(layer) + "." + std::string(point);
}

Tensor head_mask(int64_t heads, int64_t head) {
  if (head < 0 || head >= heads) fail("hooks: head {} is not one of {} heads", head, heads);
  Tensor mask = Tensor::zeros({1, 1, heads, 1});
  mask[head] = 1.0f;
  return mask;
}

Var patch_head(const Var& z, const Var& source, int64_t head) {
  if (z.rank() != 4) fail("hooks: a per-head value is [B, T, h, d], not {}", z.shape().str());
  return where(head_mask(z.size(2), head), source, z);
}

Var zero_head(const Var& z, int64_t head) {
  return patch_head(z, Var(Tensor::zeros(z.shape())), head);
}

HookGuard::HookGuard(Module& module, Hooks& hooks)
    : module_(module), previous_(module.attached_hooks()) {
  module_.attach_hooks(&hooks, "");
}

HookGuard::~HookGuard() {
  module_.attach_hooks(previous_, "");
}

}  // namespace headlab
