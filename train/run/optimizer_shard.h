#pragma once
// ZeRO-1 sharding of the optimizer state over the ranks (runtime.shard_optimizer,
// docs/distributed.md, "Sharded optimizer state"): each rank updates and keeps the state of the
// parameters it owns, about 1/N of the elements, and then sends their new values to every other
// rank. The partition is of whole parameter tensors: the optimizer updates parameter by
// parameter (Optimizer::updates_per_parameter), so an owner given the same reduced gradient,
// rate, step count and clipped norm as one process makes the same bits, and the job stays
// bit-identical to one process.
//
//   OptimizerShard shard(comm, optimizer, config.runtime.shard_optimizer);
//   ... every rank: reduce, clip, optimizer.step() (the owned parameters only) ...
//   shard.broadcast_parameters();          // every rank: every parameter's new value
//   StateDict full = shard.gather_state(); // rank 0: the whole state, as unsharded (to save)
//   shard.scatter_state();                 // after rank 0 loaded the whole state: each rank its
//                                          // own, rank 0 keeps its own
//
// With one rank, or sharding off, every call is a no-op (gather_state is state_dict()).

#include <cstdint>
#include <vector>

#include "core/state_dict.h"

namespace headlab {

class Comm;
class Optimizer;

// The owner of each parameter (of `sizes` elements) among `ranks`: largest first (ties: the
// earlier parameter), each to the rank with the fewest elements so far (ties: the lower rank).
// Deterministic, so every rank computes the same.
std::vector<int> shard_owners(const std::vector<int64_t>& sizes, int ranks);

class OptimizerShard {
 public:
  // Sets the optimizer's owned parameters (Optimizer::set_owned) when `enabled` and there is more
  // than one rank. Throws headlab::Error naming runtime.shard_optimizer when `enabled` and the
  // optimizer does not update per parameter (also alone, so a config means the same everywhere).
  OptimizerShard(Comm& comm, Optimizer& optimizer, bool enabled);

  // Whether the state is sharded (enabled, more than one rank).
  bool active() const { return active_; }
  // The rank that updates parameter i (this rank for all when not active).
  int owner(size_t i) const { return owners_[i]; }
  // Every owner's parameters' values to every rank (collective; after optimizer.step()).
  void broadcast_parameters();
  // The whole state as Optimizer::state_dict() of one process has it, on rank 0 (the owners send
  // theirs); an empty dict on the other ranks. Collective.
  StateDict gather_state();
  // Rank 0 holds the whole state (it loaded it with every parameter owned): sends each rank its
  // parameters' state, then keeps its own only. Every other rank loads what it received (its
  // step count included). Collective; call it only when active().
  void scatter_state();
  // Bytes of optimizer state rank r holds once every owned parameter's state is allocated (the
  // state's slots x 4 bytes x its parameters' elements); with sharding off, every rank's is the
  // whole state.
  std::vector<int64_t> state_bytes_per_rank() const;

 private:
  Comm& comm_;
  Optimizer& optimizer_;
  bool active_ = false;
  std::vector<int> owners_;
  std::vector<float> buffer_;  // broadcast_parameters: one owner's values, packed
};

}  // namespace headlab
