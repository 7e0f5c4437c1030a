#pragma once
// What the parts of the Open MPI world (train/distributed/mpi) share: the one lock every MPI call
// is made under, whichever thread makes it (MPI_THREAD_SERIALIZED), the pause of a wait that
// sleeps, and MPI's text for an error code. Internal to the world, which only the CLI links, so
// not installed (cmake/HeadlabPackage.cmake).

#include <mpi.h>

#include <mutex>
#include <string>

namespace headlab::mpi {

// Held for every MPI call after MPI_Init: the job's own (the main thread's, or the gradient
// reducer's chain thread), the answering thread's and a presence call's. Timed: a presence call
// gives up when a call of the job does not return (Open MPI's notice of a peer that hung up on
// TCP waits inside MPI_Test for mpirun, which is busy ending the job).
std::timed_mutex& lock();

// `call()` under lock(): its MPI return code.
template <class F>
int locked(F&& call) {
  std::lock_guard guard(lock());
  return call();
}

// One millisecond's sleep: what a wait that is far behind does between two tests.
void nap();

// MPI's text for an error code ("error N" where it has none).
std::string error_text(int code);

}  // namespace headlab::mpi
