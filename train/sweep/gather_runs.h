#pragma once
// A distributed sweep's run directories, brought to rank 0's host. Run i of a sweep over N
// ranks is trained by rank i mod N, in the sweep directory on that rank's host
// (train/cli/sweep.cpp). Without a shared filesystem, rank 0 would hold only its own runs, and
// the sweep's report would link to directories that are not there. After training, every rank
// tells rank 0 the run.json of each run it trained; a run whose directory rank 0 sees with the
// same run.json (a shared filesystem) stays as it is, and every other one is sent to rank 0 as
// one message and written there into a temporary directory that is then renamed into place,
// so rank 0's sweep directory never shows half a run. The senders keep their copies.

#include <vector>

#include "train/distributed/comm.h"
#include "train/sweep/plan.h"

namespace headlab {

// Collective: every rank calls it with the same runs. Returns how many run directories rank 0
// received (0 on the other ranks). Throws headlab::Error (on every rank, via the agreement of
// train/distributed/agree.h) when rank 0 has a directory of the same name holding another run
// (it is never replaced), or when a directory cannot be read or written.
int gather_run_dirs(Comm& comm, const std::vector<SweepRun>& runs);

// A directory tree (regular files, directories, symbolic links, relative paths in sorted
// order) as one byte string, and back into a directory `into` that must not exist yet. Refuses
// entries of other kinds, and paths that are absolute or climb out with "..".
std::string pack_tree(const std::filesystem::path& dir);
void unpack_tree(const std::string& packed, const std::filesystem::path& into);

}  // namespace headlab
