// What headlab reads from a launcher's environment before MPI is opened (train/distributed/
// world.h), in builds with and without MPI: srun's tasks (SLURM_STEP_ID and PMIx's rank, the
// size in SLURM_STEP_NUM_TASKS, as `srun --mpi=pmix` gives them) count as ranks, so a one-process
// command is refused naming srun; a build without MPI refuses to be one of N ranks (scripts/
// test-nompi.sh runs this suite in such a build).

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "tests/reliability/process.h"
#include "tests/reliability/run_dir.h"

using namespace headlab::testing;

namespace {

// A task of `srun -n 2 --mpi=pmix`, as far as the environment goes (no PMIx server behind it).
RunOptions srun_task_env() {
  RunOptions o;
  o.env = {"SLURM_STEP_ID=0", "SLURM_JOB_ID=7", "SLURM_PROCID=0", "SLURM_STEP_NUM_TASKS=2",
           "PMIX_RANK=0"};
  o.timeout_seconds = 60;
  return o;
}

}  // namespace

TEST_CASE("train: a one-process command under srun -n 2 is refused, naming srun") {
  TempDir tmp("srun-env");
  const RunResult r = run_cli({"eval", (tmp / "run").string()}, srun_task_env());
  CHECK(r.exit_code == 2);
  CHECK_MESSAGE(
      r.err.find("headlab eval runs as one process; run it without srun") != std::string::npos,
      r.describe());
}

TEST_CASE("train: a headlab built without MPI refuses to run as one of 2 ranks") {
  const RunResult info = run_cli({"info"});
  REQUIRE_MESSAGE(info.exit_code == 0, info.describe());
  if (info.out.find("mpi: not built") == std::string::npos) {
    MESSAGE("skipped: this headlab is built with MPI (the dist tests run it under mpirun)");
    return;
  }
  TempDir tmp("nompi-ranks");
  const std::string config = (source_dir() / "tests" / "reliability" / "crash.toml").string();
  struct Launcher {
    std::string name;
    std::vector<std::string> env;
  };
  for (const Launcher& l :
       {Launcher{"mpirun", {"OMPI_COMM_WORLD_SIZE=2", "OMPI_COMM_WORLD_RANK=0"}},
        Launcher{"srun", srun_task_env().env}}) {
    RunOptions o;
    o.env = l.env;
    const RunResult r =
        run_cli({"train", config, "--out", (tmp / l.name).string(), "--dry-run"}, o);
    INFO(l.name << ": " << r.describe());
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("this headlab was built without MPI, so it cannot run as one of 2 ranks "
                     "under " +
                     l.name) != std::string::npos);
  }
}
