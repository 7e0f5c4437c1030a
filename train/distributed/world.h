#pragma once
// The process's world: opened once by the CLI at start-up, closed at exit.
//
// `mpirun -np N headlab train ...` starts N processes; open_world() makes each one rank r of N
// through Open MPI (MPI_Init) when headlab was built with MPI (CMake found it; `headlab info`
// says so), and a LocalComm of one rank when the process was not started by an MPI launcher.
// A build without MPI refuses to run under one, rather than train N independent copies into
// one run directory.
//
// This is the one part of headlab that includes <mpi.h> (train/distributed/mpi/, module train_world);
// the rest of the library codes against Comm (train/distributed/comm.h).

#include <memory>
#include <string>

#include "train/distributed/comm.h"

namespace headlab {

// Whether this process was started by an MPI launcher (Open MPI's mpirun, or a PMI/PMIx
// launcher such as srun): its environment has OMPI_COMM_WORLD_SIZE, PMIX_RANK or PMI_RANK.
bool launched_by_mpi();
// The rank and size the launcher announces in the environment (0 and 1 without one); known
// before MPI_Init, so the CLI can speak for rank 0 alone before opening the world.
int launcher_rank();
int launcher_size();
// "mpirun" (Open MPI's: OMPI_COMM_WORLD_SIZE), "srun" (Slurm's: SLURM_STEP_ID with PMIx's or
// PMI's rank), or "" when no launcher started this process.
std::string launcher_name();

// The MPI library this headlab was built with ("Open MPI v4.1.4"), or "" without MPI.
std::string mpi_library();

// The world: MPI's when launched_by_mpi() (initialising MPI), else a LocalComm. Throws
// headlab::Error when launched by MPI but built without it, or when MPI_Init fails.
std::unique_ptr<Comm> open_world();
// Finalizes MPI if open_world() initialised it (call once, at normal exit, on every rank).
void close_world();
// Ends every rank of the job at once with exit code `code` (MPI_Abort): the CLI's way out when
// one rank fails alone and the others would wait for it. Without MPI, exits this process.
[[noreturn]] void abort_world(int code);

}  // namespace headlab
