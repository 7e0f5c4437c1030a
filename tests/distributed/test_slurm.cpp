// srun as headlab's launcher (docs/distributed.md): on a one-node Slurm cluster the test starts
// in a temporary directory (tests/distributed/slurm_cluster.sh), `srun -n 2 --mpi=pmix headlab
// train` gives one process's bits, and a graceful stop (SIGUSR1 to srun) prints a continue
// command with `srun -n 2` that resumes to the same bits. Skipped, saying why, where the
// daemons cannot start (Slurm not installed, not root).

#include <doctest/doctest.h>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "tests/distributed/mpi_runs.h"
#include "tests/reliability/process.h"
#include "tests/reliability/run_dir.h"

using namespace headlab::testing;
namespace fs = std::filesystem;

namespace {

fs::path cluster_script() {
  return source_dir() / "tests" / "distributed" / "slurm_cluster.sh";
}

// `name` as found on PATH (the tests' runner starts programs by path), or `name`.
fs::path program_on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  for (std::string_view rest = path ? path : ""; !rest.empty();) {
    const size_t colon = rest.find(':');
    const fs::path p = fs::path(std::string(rest.substr(0, colon))) / name;
    if (::access(p.c_str(), X_OK) == 0) return p;
    rest = colon == std::string_view::npos ? "" : rest.substr(colon + 1);
  }
  return name;
}

// The cluster's daemons, stopped when it goes.
class SlurmCluster {
 public:
  explicit SlurmCluster(const fs::path& dir) : dir_(dir) {
    RunOptions o;
    o.program = "/bin/sh";
    o.timeout_seconds = 60;
    const RunResult r = run_cli({cluster_script().string(), "start", dir.string()}, o);
    started_ = r.exit_code == 0;
    why_ = r.err_lines().empty() ? r.describe() : r.err_lines().back();
  }
  ~SlurmCluster() {
    RunOptions o;
    o.program = "/bin/sh";
    o.timeout_seconds = 30;
    run_cli({cluster_script().string(), "stop", dir_.string()}, o);
  }
  bool started() const { return started_; }
  const std::string& why() const { return why_; }

  // srun as the test runs it: this cluster's config, tasks through PMIx, as mpirun_options().
  RunOptions srun_options() const {
    RunOptions o = mpirun_options({"SLURM_CONF=" + (dir_ / "slurm.conf").string()});
    o.program = program_on_path("srun");
    return o;
  }

 private:
  fs::path dir_;
  bool started_ = false;
  std::string why_;
};

std::vector<std::string> srun_args(int tasks, const std::vector<std::string>& command) {
  std::vector<std::string> a = {"-n", std::to_string(tasks), "--mpi=pmix", "--overcommit"};
  a.insert(a.end(), command.begin(), command.end());
  return a;
}

}  // namespace

TEST_CASE("dist: slurm: srun -n 2 trains as one process does, and continues after a stop") {
  TempDir tmp("dist-slurm");
  SlurmCluster cluster(tmp / "cluster");
  if (!cluster.started()) {
    MESSAGE("skipped: no one-node Slurm cluster here: " << cluster.why());
    return;
  }
  const std::vector<std::string> sets = {"train.steps=200", "train.checkpoint_every=0",
                                         "train.eval_every=100", "schedule.warmup_steps=3"};
  std::vector<std::string> accum = sets;
  accum.push_back("train.grad_accum=2");
  const fs::path one = tmp / "one", two = tmp / "two", stopped = tmp / "stopped";
  const RunResult ref = alone(train_args(one, accum));
  REQUIRE_MESSAGE(ref.exit_code == 0, ref.describe());
  const RunResult r = run_cli(srun_args(2, train_args(two, sets)), cluster.srun_options());
  REQUIRE_MESSAGE(r.exit_code == 0, r.describe());
  check_same(outcome(two), outcome(one), "srun -n 2 vs one process x 2");

  CliProcess job(srun_args(2, train_args(stopped, sets)), cluster.srun_options());
  const auto start = std::chrono::steady_clock::now();
  while (job.running() && lines_in(stopped / "metrics.jsonl") < 3 &&
         std::chrono::steady_clock::now() - start < std::chrono::seconds(120))
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  job.signal(SIGUSR1);  // srun forwards it to its tasks
  const RunResult s = job.wait();
  REQUIRE_MESSAGE(s.err.find("headlab: interrupted by SIGUSR1 at step") != std::string::npos,
                  s.describe());
  const size_t at = s.err.find("continue with: ");
  REQUIRE(at != std::string::npos);
  const std::string line = s.err.substr(at + 15, s.err.find('\n', at) - at - 15);
  INFO("continue with: " << line);
  REQUIRE(line.rfind(fmt::format("srun -n 2 {} train ", HEADLAB_CLI), 0) == 0);
  // The printed command with this cluster's --mpi and --overcommit, as a user adds theirs.
  const std::vector<std::string> words = split_args(line, {});
  const RunResult c =
      run_cli(srun_args(2, std::vector<std::string>(words.begin() + 3, words.end())),
              cluster.srun_options());
  REQUIRE_MESSAGE(c.exit_code == 0, c.describe());
  check_same(outcome(stopped), outcome(one), "stopped under srun and continued");
}
