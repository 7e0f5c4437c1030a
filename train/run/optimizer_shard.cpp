// ZeRO-1 sharding of the optimizer state (optimizer_shard.h). Every exchange is packed by rank:
// one message (or broadcast) per rank and call, the tensors in parameter order, so the ranks'
// calls pair up without any header.

#include "train/run/optimizer_shard.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "optim/optimizer.h"
#include "train/distributed/comm.h"

namespace headlab {

std::vector<int> shard_owners(const std::vector<int64_t>& sizes, int ranks) {
  HEADLAB_ASSERT(ranks >= 1);
  std::vector<size_t> order(sizes.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return sizes[a] > sizes[b]; });
  std::vector<int64_t> load(static_cast<size_t>(ranks), 0);
  std::vector<int> owners(sizes.size(), 0);
  for (size_t i : order) {
    const auto least = std::min_element(load.begin(), load.end());  // the first of equals
    owners[i] = static_cast<int>(least - load.begin());
    *least += sizes[i];
  }
  return owners;
}

OptimizerShard::OptimizerShard(Comm& comm, Optimizer& optimizer, bool enabled)
    : comm_(comm), optimizer_(optimizer) {
  const NamedParameters& params = optimizer.parameters();
  if (enabled && !optimizer.updates_per_parameter())
    fail(
        "runtime.shard_optimizer: optimizer \"{}\" does not declare a per-parameter update "
        "(Optimizer::updates_per_parameter), so its state cannot be sharded; set "
        "runtime.shard_optimizer = false",
        optimizer.name());
  active_ = enabled && comm.size() > 1;
  std::vector<int64_t> sizes;
  for (const auto& p : params) sizes.push_back(p.var.numel());
  owners_ =
      active_ ? shard_owners(sizes, comm.size()) : std::vector<int>(params.size(), comm.rank());
  if (!active_) return;
  std::vector<bool> owned(params.size());
  std::vector<int64_t> per_rank(static_cast<size_t>(comm.size()), 0);
  for (size_t i = 0; i < params.size(); ++i) {
    owned[i] = owners_[i] == comm.rank();
    per_rank[static_cast<size_t>(owners_[i])] += sizes[i];
  }
  optimizer.set_owned(std::move(owned));
  buffer_.resize(static_cast<size_t>(*std::max_element(per_rank.begin(), per_rank.end())));
}

void OptimizerShard::broadcast_parameters() {
  if (!active_) return;
  const NamedParameters& params = optimizer_.parameters();
  for (int r = 0; r < comm_.size(); ++r) {
    const bool mine = r == comm_.rank();
    size_t n = 0;
    for (size_t i = 0; i < params.size(); ++i) {
      if (owners_[i] != r) continue;
      const Tensor& v = params[i].var.value();
      if (mine) std::copy(v.data(), v.data() + v.numel(), buffer_.data() + n);
      n += static_cast<size_t>(v.numel());
    }
    comm_.broadcast(r, bytes_of(std::span(buffer_.data(), n)));
    if (mine) continue;
    n = 0;
    for (size_t i = 0; i < params.size(); ++i) {
      if (owners_[i] != r) continue;
      Tensor& v = params[i].var.value();
      std::copy(buffer_.data() + n, buffer_.data() + n + v.numel(), v.data());
      n += static_cast<size_t>(v.numel());
    }
  }
}

StateDict OptimizerShard::gather_state() {
  StateDict dict = optimizer_.state_dict();  // the owned slots alias the live state
  if (!active_) return dict;
  const size_t params = optimizer_.parameters().size();
  const size_t slots = optimizer_.state_names().size();
  // dict[k * params + i]: slot k of parameter i (Optimizer::state_dict's order).
  auto floats_of = [&](int r) {
    size_t n = 0;
    for (size_t i = 0; i < params; ++i)
      if (owners_[i] == r) n += static_cast<size_t>(optimizer_.parameters()[i].var.numel()) * slots;
    return n;
  };
  auto each_owned = [&](int r, auto&& f) {
    for (size_t i = 0; i < params; ++i)
      if (owners_[i] == r)
        for (size_t k = 0; k < slots; ++k) f(dict[k * params + i].tensor);
  };
  if (comm_.rank() != 0) {
    std::vector<float> packed(floats_of(comm_.rank()));
    float* at = packed.data();
    each_owned(comm_.rank(), [&](const Tensor& t) { at = std::copy_n(t.data(), t.numel(), at); });
    comm_.send(0, bytes_of(std::span<const float>(packed)));
    return {};
  }
  for (int r = 1; r < comm_.size(); ++r) {
    std::vector<float> packed(floats_of(r));
    comm_.recv(r, bytes_of(std::span(packed)));
    const float* at = packed.data();
    each_owned(r, [&](Tensor& t) {
      std::copy_n(at, t.numel(), t.data());  // a fresh zeros tensor of state_dict()'s
      at += t.numel();
    });
  }
  return dict;
}

void OptimizerShard::scatter_state() {
  HEADLAB_ASSERT(active_);
  const NamedParameters& params = optimizer_.parameters();
  const std::vector<std::string>& slots = optimizer_.state_names();
  int64_t step = optimizer_.step_count();
  comm_.broadcast(0, bytes_of(std::span(&step, 1)));
  if (comm_.rank() == 0) {
    const StateDict dict = optimizer_.state_dict();  // every parameter's: rank 0 owns all here
    for (int r = 1; r < comm_.size(); ++r) {
      std::vector<float> packed;
      for (size_t i = 0; i < params.size(); ++i)
        if (owners_[i] == r)
          for (size_t k = 0; k < slots.size(); ++k) {
            const Tensor& t = dict[k * params.size() + i].tensor;
            packed.insert(packed.end(), t.data(), t.data() + t.numel());
          }
      comm_.send(r, bytes_of(std::span<const float>(packed)));
    }
    std::vector<bool> owned(params.size());
    for (size_t i = 0; i < params.size(); ++i) owned[i] = owners_[i] == 0;
    optimizer_.set_owned(std::move(owned));
    return;
  }
  size_t n = 0;
  for (size_t i = 0; i < params.size(); ++i)
    if (owners_[i] == comm_.rank()) n += static_cast<size_t>(params[i].var.numel()) * slots.size();
  std::vector<float> packed(n);
  comm_.recv(0, bytes_of(std::span(packed)));
  StateDict mine;  // the owned parameters' slots (the others' may be absent: set_owned)
  const float* at = packed.data();
  for (size_t i = 0; i < params.size(); ++i)
    if (owners_[i] == comm_.rank())
      for (const std::string& slot : slots) {
        const Shape& shape = params[i].var.shape();
        mine.push_back({slot + "." + params[i].name,
                        Tensor::from(shape, std::span<const float>(at, shape.numel()))});
        at += shape.numel();
      }
  mine.push_back({"step", Optimizer::step_to_tensor(step)});
  optimizer_.load_state_dict(mine);
}

std::vector<int64_t> OptimizerShard::state_bytes_per_rank() const {
  const NamedParameters& params = optimizer_.parameters();
  const int64_t slot_bytes = static_cast<int64_t>(optimizer_.state_names().size() * sizeof(float));
  std::vector<int64_t> bytes(static_cast<size_t>(comm_.size()), 0);
  for (size_t i = 0; i < params.size(); ++i)
    for (int r = 0; r < comm_.size(); ++r)
      if (!active_ || owners_[i] == r)
        bytes[static_cast<size_t>(r)] += params[i].var.numel() * slot_bytes;
  return bytes;
}

}  // namespace headlab
