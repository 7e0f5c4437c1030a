#pragma once
// Sending state from one rank to the others: what rank 0 read from a checkpoint, to ranks that
// never read the run directory (it need not be on a shared filesystem).

#include "core/state_dict.h"
#include "train/distributed/comm.h"

namespace headlab {

// root's `dict` on every rank: names, shapes and values; the other ranks' `dict` is replaced.
void broadcast_state_dict(Comm& comm, int root, StateDict& dict);

// root's `values` on every rank (the same count everywhere).
template <class T>
void broadcast_values(Comm& comm, int root, std::span<T> values) {
  comm.broadcast(root, bytes_of(values));
}

}  // namespace headlab
