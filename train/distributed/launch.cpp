// What an MPI launcher tells a process through its environment (train/distributed/world.h).

#include <cstdlib>
#include <string>

#include "train/distributed/world.h"

namespace headlab {
namespace {

// The first of the variables that is set, as a non-negative integer, else -1.
int env_int(std::initializer_list<const char*> names) {
  for (const char* name : names) {
    const char* v = std::getenv(name);
    if (v == nullptr || *v == '\0') continue;
    char* end = nullptr;
    const long n = std::strtol(v, &end, 10);
    if (*end == '\0' && n >= 0 && n < (1L << 30)) return static_cast<int>(n);
  }
  return -1;
}

}  // namespace

bool launched_by_mpi() {
  return env_int({"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) >= 0 ||
         env_int({"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"}) >= 0;
}

int launcher_rank() {
  const int r = env_int({"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"});
  return r < 0 ? 0 : r;
}

int launcher_size() {
  const int n = env_int({"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"});
  return n < 1 ? 1 : n;
}

}  // namespace headlab
