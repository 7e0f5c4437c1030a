#include "layers/qkv_state.h"

#include <array>
#include <functional>
#include <unordered_map>
#include <unordered_set>

namespace headlab {
namespace {

constexpr std::array<const char*, 3> kParts = {"w_q.", "w_k.", "w_v."};

// The three tensors [rows, ..] stacked along dim 0.
Tensor stack_rows(const std::array<const Tensor*, 3>& parts) {
  Shape shape = parts[0]->shape();
  shape[0] *= 3;
  Tensor out = Tensor::empty(shape);
  int64_t row = 0;
  for (const Tensor* p : parts) {
    out.slice(row, row + p->size(0)).copy_(*p);
    row += p->size(0);
  }
  return out;
}

}  // namespace

StateDict stack_legacy_qkv(const StateDict& state,
                           const std::function<bool(const std::string&)>& expected) {
  std::unordered_map<std::string, const Tensor*> given;
  for (const auto& t : state) given.emplace(t.name, &t.tensor);
  // Old name of the Q part -> the stacked tensor under its new name; the K and V names to drop.
  std::unordered_map<std::string, NamedTensor> stacked;
  std::unordered_set<std::string> dropped;
  for (const auto& t : state) {
    for (const char* leaf : {"weight", "bias"}) {
      const std::string q_name = std::string(kParts[0]) + leaf;
      if (t.name.size() < q_name.size() || !t.name.ends_with(q_name)) continue;
      const std::string prefix = t.name.substr(0, t.name.size() - q_name.size());
      if (!prefix.empty() && prefix.back() != '.') continue;
      const std::string new_name =
          prefix + (leaf == std::string("weight") ? "in_proj_weight" : "in_proj_bias");
      if (!expected(new_name) || given.count(new_name)) continue;
      std::array<const Tensor*, 3> parts{&t.tensor, nullptr, nullptr};
      for (size_t i = 1; i < 3; ++i) {
        auto it = given.find(prefix + kParts[i] + leaf);
        if (it != given.end() && it->second->shape() == t.tensor.shape()) parts[i] = it->second;
      }
      if (!parts[1] || !parts[2] || t.tensor.rank() < 1) continue;
      stacked.emplace(t.name, NamedTensor{new_name, stack_rows(parts)});
      dropped.insert(prefix + kParts[1] + leaf);
      dropped.insert(prefix + kParts[2] + leaf);
    }
  }
  if (stacked.empty()) return state;
  StateDict out;
  out.reserve(state.size());
  for (const auto& t : state) {
    if (auto it = stacked.find(t.name); it != stacked.end())
      out.push_back(it->second);
    else if (!dropped.count(t.name))
      out.push_back(t);
  }
  return out;
}

}  // namespace headlab
