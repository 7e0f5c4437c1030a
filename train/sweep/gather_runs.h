#pragma once
// A distributed sweep's run directories between hosts without a shared filesystem. Run i of a
// sweep over N ranks is trained by rank i mod N (its trainer), in the sweep directory on that
// rank's host (train/cli/sweep.cpp). Rank 0's host is the sweep's home: its report links there,
// and `sweep --resume` starts from there, so:
//
//  - after training, every run directory is brought to rank 0's host (gather_run_dirs): a run
//    whose copy there is the same (a shared filesystem) stays as it is; one missing there, or
//    older (resumed on another host since it was brought), comes from its trainer;
//  - before a distributed --resume trains, each trainer gets the newest copy of its runs
//    (send_run_dirs_to_trainers): where rank 0's copy continues the trainer's (or the trainer
//    has none, as on a host new to the sweep), rank 0 sends it; a trainer's own newer copy (a
//    job killed before its gather) is kept and resumed.
//
// Which copy is newer comes from run.json (train/sweep/run_copy.h); copies that went their own
// ways are never replaced: the sweep stops with one line naming the run. A copy arrives as one
// message and is placed whole (place_tree). The senders keep their copies.

#include <vector>

#include "train/distributed/comm.h"
#include "train/sweep/plan.h"

namespace headlab {

// Collective: every rank calls it with the same runs, after they trained. Returns how many run
// directories rank 0 received (0 on the other ranks). Throws headlab::Error on every rank (via
// train/distributed/agree.h) when rank 0 has a directory of the same name holding another run
// or a newer copy of it, or when a directory cannot be read or written.
int gather_run_dirs(Comm& comm, const std::vector<SweepRun>& runs);

// Collective, before a distributed --resume plans its runs' states: returns how many run
// directories rank 0 sent (0 on the other ranks). Throws headlab::Error on every rank when the
// trainer's copy and rank 0's went their own ways, or a directory cannot be read or written.
int send_run_dirs_to_trainers(Comm& comm, const std::vector<SweepRun>& runs);

}  // namespace headlab
