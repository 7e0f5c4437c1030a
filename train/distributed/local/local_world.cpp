// The world of a headlab built without MPI (train/distributed/world.h): always one process.

#include <cstdio>
#include <cstdlib>

#include "core/error.h"
#include "train/distributed/world.h"

namespace headlab {

std::string mpi_library() {
  return "";
}

std::unique_ptr<Comm> open_world() {
  if (launched_by_mpi() && launcher_size() > 1)
    fail(
        "this headlab was built without MPI, so it cannot run as one of {} ranks under {}; "
        "install libopenmpi-dev (scripts/install-deps.sh), rebuild, or run it without {}",
        launcher_size(), launcher_name(), launcher_name());
  return std::make_unique<LocalComm>();
}

void close_world() {}

void abort_world(int code) {
  std::fflush(nullptr);
  std::_Exit(code);
}

}  // namespace headlab
