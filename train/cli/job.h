#pragma once
// The CLI's distributed world (train/distributed/world.h): opened by main() before any command runs,
// one rank of one when headlab was not started by mpirun.

#include <memory>
#include <string>

#include "train/distributed/comm.h"

namespace headlab {
struct Config;
}

namespace headlab::cli {

// The world main() opened.
Comm& world();
void set_world(std::unique_ptr<Comm> comm);
// Whether this process speaks for the job on stdout and stderr (rank 0; every process alone).
inline bool speaks_for_job() {
  return world().is_root();
}

// "headlab <version>", the build ID, the loaded plugins (path and SHA-256), the registered layers
// and tasks and the CPU's kernels: what must be the same on every rank for their numbers to be.
std::string build_fingerprint();

// What besides the config and the build can change a rank's numbers, one "name: value" a line:
// the kernels dispatched on this CPU (OpenBLAS's core, oneDNN's ISA, headlab's own AVX-512
// path), the thread count `threads` resolves to (0: every core), and the environment variables
// that steer them (OPENBLAS_CORETYPE, ONEDNN_MAX_CPU_ISA, OMP_NUM_THREADS, ...).
std::string numeric_settings(int threads);

// Start-up check of a distributed command: the same resolved config (`config_text`), the same
// build and the same numeric_settings on every rank; else every rank throws CollectiveError naming the first rank that
// differs and how. Sets the world's timeout from runtime.dist_timeout. Nothing alone.
void check_ranks_agree(const Config& config);

// Under a launcher, when this rank's `threads` (0: every core) exceed the cores it is bound to:
// the warning line naming the launcher's flag that gives each rank its threads' cores; else "".
// (mpirun binds each of up to 2 ranks to one core by default, and the threads then share it.)
std::string binding_warning(int threads);
// The same for a sweep under a launcher, whose runs are processes of their own on this rank's
// cores (they inherit its binding): when `at_once` runs of `threads` threads each (the most any
// run has) exceed them, the warning line naming the launcher's flag (and --jobs, when above 1);
// else "". Without a launcher nothing binds the runs: --jobs above the cores is the user's call.
std::string sweep_binding_warning(int threads, int64_t at_once);

}  // namespace headlab::cli
