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

bool is_set(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0';
}

// Slurm's srun gives each task of a step SLURM_STEP_ID and, with --mpi=pmix (or pmi2), PMIx's
// (PMI's) rank; Open MPI's mpirun sets OMPI_COMM_WORLD_SIZE, also inside a Slurm allocation.
bool started_by_srun() {
  return !is_set("OMPI_COMM_WORLD_SIZE") && is_set("SLURM_STEP_ID") &&
         (is_set("PMIX_RANK") || is_set("PMI_RANK"));
}

}  // namespace

bool launched_by_mpi() {
  return env_int({"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) >= 0 ||
         env_int({"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"}) >= 0;
}

std::string launcher_name() {
  if (!launched_by_mpi()) return "";
  return started_by_srun() ? "srun" : "mpirun";
}

int launcher_rank() {
  const int r = env_int({"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"});
  return r < 0 ? 0 : r;
}

int launcher_size() {
  // PMIx announces no size in the environment (the rank asks its server): under srun the step's
  // task count is Slurm's.
  const int n = started_by_srun() ? env_int({"PMI_SIZE", "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"})
                                  : env_int({"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"});
  return n < 1 ? 1 : n;
}

}  // namespace headlab
