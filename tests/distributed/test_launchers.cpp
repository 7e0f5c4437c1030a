// What headlab makes of its launcher (docs/distributed.md): a graceful stop under mpirun prints a
// continue command that starts the same number of ranks again and resumes bit for bit; a rank
// whose threads exceed the cores mpirun bound it to warns once, naming the flags; the children
// of a sweep under mpirun start without the launcher's environment (they run alone).

#include <doctest/doctest.h>

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tests/distributed/mpi_runs.h"
#include "tests/reliability/process.h"
#include "tests/reliability/run_dir.h"

using namespace headlab::testing;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string read_proc(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// The NUL-separated entries of /proc/PID/environ or cmdline.
std::vector<std::string> entries(const std::string& text) {
  std::vector<std::string> out;
  for (size_t at = 0; at < text.size();) {
    const size_t end = text.find('\0', at);
    out.push_back(text.substr(at, end == std::string::npos ? std::string::npos : end - at));
    at = end == std::string::npos ? text.size() : end + 1;
  }
  return out;
}

// The text after "continue with: " on the line of `err` that has it, or "".
std::string continue_command(const std::string& err) {
  const std::string mark = "continue with: ";
  const size_t at = err.find(mark);
  if (at == std::string::npos) return "";
  const size_t end = err.find('\n', at);
  return err.substr(at + mark.size(),
                    end == std::string::npos ? std::string::npos : end - at - mark.size());
}

}  // namespace

TEST_CASE("dist: a graceful stop under mpirun prints a continue command with mpirun -np 2") {
  TempDir tmp("dist-continue");
  const std::vector<std::string> sets = {"train.steps=200", "train.checkpoint_every=0",
                                         "train.eval_every=100", "schedule.warmup_steps=3"};
  const fs::path straight = tmp / "straight", run = tmp / "stopped";
  const RunResult s = mpirun(2, train_args(straight, sets));
  REQUIRE_MESSAGE(s.exit_code == 0, s.describe());

  std::vector<std::string> args = ranks_of(2);
  for (const std::string& a : train_args(run, sets)) args.push_back(a);
  CliProcess job(args, mpirun_options());
  const auto start = std::chrono::steady_clock::now();
  while (job.running() && lines_in(run / "metrics.jsonl") < 3 &&
         std::chrono::steady_clock::now() - start < std::chrono::seconds(120))
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  job.signal(SIGUSR1);  // mpirun forwards it to every rank
  const RunResult stopped = job.wait();
  REQUIRE_MESSAGE(stopped.err.find("headlab: interrupted by SIGUSR1 at step") != std::string::npos,
                  stopped.describe());
  const std::string line = continue_command(stopped.err);
  INFO("continue with: " << line);
  CHECK(line.rfind(fmt::format("mpirun -np 2 {} train ", HEADLAB_CLI), 0) == 0);
  CHECK(line.find(" --resume") != std::string::npos);

  // The printed command, with the options this machine's mpirun needs (as the user adds theirs),
  // continues the run to the straight run's bits.
  const std::vector<std::string> words = split_args(line, {});
  REQUIRE(words.size() > 3);
  const RunResult r = mpirun(2, std::vector<std::string>(words.begin() + 3, words.end()));
  REQUIRE_MESSAGE(r.exit_code == 0, r.describe());
  check_same(outcome(run), outcome(straight), "stopped by SIGUSR1 and continued");
}

TEST_CASE("dist: mpirun's default binding with 2 threads per rank warns once, naming the flags") {
  TempDir tmp("dist-binding");
  // Two ranks on (at least) two cores: mpirun binds each to one core unless told otherwise.
  const std::vector<std::string> sets = {"runtime.threads=2"};
  std::vector<std::string> bound = {"-np", "2"};
  for (const std::string& a : train_args(tmp / "bound", sets)) bound.push_back(a);
  bound.push_back("--dry-run");
  const RunResult b = run_cli(bound, mpirun_options());
  REQUIRE_MESSAGE(b.exit_code == 0, b.describe());
  const std::string warning =
      "headlab: warning: rank 0 runs 2 threads on 1 core (mpirun bound it; add --bind-to none or "
      "--map-by slot:PE=2)";
  size_t count = 0;
  for (const std::string& l : b.err_lines()) count += l == warning;
  CHECK_MESSAGE(count == 1, b.describe());

  std::vector<std::string> unbound = ranks_of(2);  // --bind-to none
  for (const std::string& a : train_args(tmp / "unbound", sets)) unbound.push_back(a);
  unbound.push_back("--dry-run");
  const RunResult u = run_cli(unbound, mpirun_options());
  REQUIRE_MESSAGE(u.exit_code == 0, u.describe());
  CHECK_MESSAGE(u.err.find("warning: rank") == std::string::npos, u.describe());
}

// A sweep's runs are processes of their own that inherit their rank's binding: rank 0 warns once,
// before they start, when its runs' threads exceed its cores, and not when mpirun binds nothing.
TEST_CASE("dist: a sweep under mpirun's default binding with 2 threads per run warns once") {
  TempDir tmp("dist-sweep-binding");
  std::vector<std::string> sweep = {HEADLAB_CLI, "sweep",           dist_config().string(),
                                    "--over",    "model.heads=1,2", "--seeds",
                                    "1",         "--no-progress"};
  for (const char* set : {"train.steps=4", "schedule.warmup_steps=1", "runtime.threads=2"})
    sweep.insert(sweep.end(), {"--set", set});
  std::vector<std::string> bound = {"-np", "2"};
  bound.insert(bound.end(), sweep.begin(), sweep.end());
  bound.insert(bound.end(), {"--out", (tmp / "bound").string()});
  const RunResult b = run_cli(bound, mpirun_options());
  REQUIRE_MESSAGE(b.exit_code == 0, b.describe());
  const std::string warning =
      "headlab: warning: rank 0's sweep runs 1 run at a time of 2 threads each: 2 threads on 1 "
      "core (mpirun bound it; add --bind-to none or --map-by slot:PE=2)";
  size_t count = 0;
  for (const std::string& l : b.err_lines()) count += l == warning;
  CHECK_MESSAGE(count == 1, b.describe());

  std::vector<std::string> unbound = ranks_of(2);  // --bind-to none
  unbound.insert(unbound.end(), sweep.begin(), sweep.end());
  unbound.insert(unbound.end(), {"--out", (tmp / "unbound").string()});
  const RunResult u = run_cli(unbound, mpirun_options());
  REQUIRE_MESSAGE(u.exit_code == 0, u.describe());
  CHECK_MESSAGE(u.err.find("warning: rank") == std::string::npos, u.describe());
}

TEST_CASE("dist: a sweep's children start without the launcher's OMPI_, PMIX_ and PMI_ variables") {
  TempDir tmp("dist-sweep-env");
  const std::string tag = fmt::format("{}-sweep-env", ::getpid());
  std::vector<std::string> args = ranks_of(1);
  args.insert(args.end(),
              {HEADLAB_CLI, "sweep", dist_config().string(), "--over", "model.heads=1,2", "--seeds",
               "1", "--set", "train.steps=150", "--set", "schedule.warmup_steps=3", "--no-progress",
               "--out", (tmp / "sweep").string()});
  CliProcess sweep(args, mpirun_options({"HEADLAB_TEST_TAG=" + tag}));
  // Every `headlab train` carrying the tag (the sweep's children) while the sweep runs: their
  // environments as the kernel has them.
  std::vector<std::string> launcher_vars;
  int children_seen = 0, sweep_launcher_vars = 0;
  std::vector<std::string> seen_pids;
  while (sweep.running()) {
    for (const auto& e : fs::directory_iterator("/proc")) {
      const std::string pid = e.path().filename().string();
      if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
      const std::vector<std::string> env = entries(read_proc(e.path() / "environ"));
      if (std::find(env.begin(), env.end(), "HEADLAB_TEST_TAG=" + tag) == env.end()) continue;
      const std::vector<std::string> cmd = entries(read_proc(e.path() / "cmdline"));
      if (cmd.size() < 2 || fs::path(cmd[0]).filename() != "headlab") continue;
      int launcher = 0;
      for (const std::string& v : env)
        if (v.rfind("OMPI_", 0) == 0 || v.rfind("PMIX_", 0) == 0 || v.rfind("PMI_", 0) == 0) {
          ++launcher;
          if (cmd[1] == "train") launcher_vars.push_back(v);
        }
      if (cmd[1] == "sweep") sweep_launcher_vars = std::max(sweep_launcher_vars, launcher);
      if (cmd[1] == "train" &&
          std::find(seen_pids.begin(), seen_pids.end(), pid) == seen_pids.end()) {
        seen_pids.push_back(pid);
        ++children_seen;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const RunResult r = sweep.wait();
  REQUIRE_MESSAGE(r.exit_code == 0, r.describe());
  CHECK_MESSAGE(sweep_launcher_vars > 0, "the sweep itself had no launcher variables to drop");
  CHECK_MESSAGE(children_seen >= 1, "no child of the sweep was seen running");
  CHECK_MESSAGE(launcher_vars.empty(),
                "a child inherited " << (launcher_vars.empty() ? "" : launcher_vars.front()));
  for (const char* run : {"heads-1_seed-1", "heads-2_seed-1"}) {
    CAPTURE(run);  // trained alone: not as one more rank of the job
    CHECK(json::parse(read_bytes(tmp / "sweep" / run / "summary.json"))["ranks"] == 1);
  }
}
