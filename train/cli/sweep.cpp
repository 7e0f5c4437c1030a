// `headlab sweep CONFIG --over KEY=V1,V2,.. [--seeds N] [--set k=v].. [--out DIR] [--jobs N]`:
// a grid of training runs. Every run re-invokes this binary as `headlab train CONFIG --set ..
// --out DIR/<run> --no-progress` (its output goes to DIR/<run>/train.log), so runs are isolated
// processes and --jobs N runs N at once. Every run's config is validated before the first
// starts. Writes DIR/sweep.json, DIR/sweep.csv and DIR/report.html.
//
// Under `mpirun -np N`, run i is trained by rank i mod N (each rank --jobs at a time), as it
// would be alone: its `headlab train` child gets the environment without the MPI launcher's
// variables, so it is a process of its own, not a rank. Rank 0 alone checks and creates the
// sweep directory; each rank sends its runs' figures and report data to rank 0 by message, and
// rank 0 writes sweep.json, sweep.csv and report.html, the same as one process would.

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "train/cli/commands.h"
#include "train/cli/world.h"
#include "train/dist/agree.h"
#include "train/report/report.h"
#include "train/run/run_dir.h"
#include "train/sweep/sweep.h"

extern char** environ;

namespace headlab::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string self_path() {
  std::error_code ec;
  const fs::path p = fs::read_symlink("/proc/self/exe", ec);
  if (ec) fail("sweep: cannot find the headlab binary (/proc/self/exe: {})", ec.message());
  return p.string();
}

// This process's environment without the variables of an MPI launcher (OMPI_*, PMIX_*, PMI_*):
// a child started with it runs alone rather than as one more rank of the job.
std::vector<char*> environment_without_launcher() {
  std::vector<char*> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view v(*e);
    if (v.starts_with("OMPI_") || v.starts_with("PMIX_") || v.starts_with("PMI_")) continue;
    env.push_back(*e);
  }
  env.push_back(nullptr);
  return env;
}

// Starts `headlab train` for one run with stdout and stderr going to <dir>/train.log.
pid_t start_run(const std::string& exe, const SweepSpec& spec, const SweepRun& run) {
  fs::create_directories(run.dir);
  std::vector<std::string> args = {exe,     "train",          spec.config.string(),
                                   "--out", run.dir.string(), "--no-progress"};
  for (const std::string& o : run.overrides) {
    args.push_back("--set");
    args.push_back(o);
  }
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const std::string log = (run.dir / "train.log").string();
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  pid_t pid = 0;
  std::vector<char*> env = environment_without_launcher();
  const int rc = posix_spawn(&pid, exe.c_str(), &actions, nullptr, argv.data(), env.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) fail("sweep: cannot start {}: {}", exe, std::strerror(rc));
  return pid;
}

std::string values_text(const SweepRun& r) {
  std::string s;
  for (const auto& [k, v] : r.values) s += k + "=" + v + " ";
  return s + fmt::format("seed={}", r.seed);
}

struct SweepArgs {
  std::string config;
  std::vector<std::string> over, sets;
  int64_t seeds = 1;
  std::string out;
  int64_t jobs = 1;
  bool no_progress = false;
  bool report_only = false;
};

// "sweep: " alone, "sweep: rank 1: " as a rank of a distributed sweep.
std::string line_prefix() {
  return world().size() > 1 ? fmt::format("sweep: rank {}: ", world().rank()) : "sweep: ";
}

// The line printed when run i of n finished (or failed).
void print_outcome(const SweepOutcome& o, size_t done, size_t n, double secs) {
  const std::string prefix = line_prefix();
  if (o.ok) {
    std::fprintf(stderr,
                 "%s[%zu/%zu] %s: eval accuracy %.4f, steps to 95%% %s, s_match %.3f, "
                 "n_claimed %lld (%.0f s)\n",
                 prefix.c_str(), done, n, values_text(o.run).c_str(), o.eval_accuracy,
                 o.steps_to_95 ? std::to_string(*o.steps_to_95).c_str() : "never", o.s_match,
                 static_cast<long long>(o.n_claimed), secs);
  } else {
    std::fprintf(stderr, "%s[%zu/%zu] %s failed: %s\n", prefix.c_str(), done, n,
                 values_text(o.run).c_str(), o.error.c_str());
  }
}

// The outcome of run `run` whose `headlab train` exited with `code`.
SweepOutcome finished_run(const SweepRun& run, int code) {
  SweepOutcome o = collect_run(run);
  if (code != 0) {
    o.ok = false;
    o.error = fmt::format("headlab train exited with code {}; see {}", code,
                          (run.dir / "train.log").string());
  }
  return o;
}

// Trains every run, `jobs` at a time, each a `headlab train` child process; returns the
// outcomes in run order and sets `worst` to the sweep's exit code (3 if a run stopped on a
// non-finite loss, 1 for other failures).
std::vector<SweepOutcome> train_runs(const SweepSpec& spec, const std::vector<SweepRun>& runs,
                                     const SweepArgs& a, int& worst) {
  const std::string exe = self_path();
  std::vector<SweepOutcome> outcomes(runs.size());
  std::map<pid_t, size_t> running;
  std::vector<std::chrono::steady_clock::time_point> started(runs.size());
  size_t next = 0, done = 0;
  worst = kOk;
  while (done < runs.size()) {
    while (next < runs.size() && static_cast<int64_t>(running.size()) < a.jobs) {
      if (!a.no_progress)
        std::fprintf(stderr, "%s[%zu/%zu] start %s\n", line_prefix().c_str(), next + 1, runs.size(),
                     values_text(runs[next]).c_str());
      started[next] = std::chrono::steady_clock::now();
      running[start_run(exe, spec, runs[next])] = next;
      ++next;
    }
    int status = 0;
    const pid_t pid = waitpid(-1, &status, 0);
    if (pid < 0) {
      if (errno == EINTR) continue;
      fail("sweep: waitpid failed: {}", std::strerror(errno));
    }
    auto it = running.find(pid);
    if (it == running.end()) continue;
    const size_t i = it->second;
    running.erase(it);
    ++done;
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    outcomes[i] = finished_run(runs[i], code);
    if (code != 0 && worst == kOk) worst = code == kNonFinite ? kNonFinite : kFailure;
    print_outcome(
        outcomes[i], done, runs.size(),
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started[i]).count());
  }
  return outcomes;
}

SweepSpec make_spec(const SweepArgs& a) {
  if (a.jobs < 1) fail("sweep: --jobs is {} but must be >= 1", a.jobs);
  if (!fs::exists(a.config)) fail("sweep: config file '{}' does not exist", a.config);
  SweepSpec spec;
  spec.config = a.config;
  for (const std::string& o : a.over) spec.over.push_back(parse_over(o));
  spec.seeds = a.seeds;
  spec.sets = a.sets;
  spec.out_dir = a.out.empty() ? fs::path("runs") / ("sweep-" + fs::path(a.config).stem().string())
                               : fs::path(a.out);
  return spec;
}

// Every rank plans the same runs; rank 0 alone checks that their directories are new and
// creates the sweep directory (where a sweep-directory lock belongs).
std::vector<SweepRun> plan_on_every_rank(const SweepSpec& spec, const SweepArgs& a) {
  Comm& comm = world();
  std::vector<SweepRun> runs;
  // Every config is checked before anything trains: exit 2 on a mistake.
  on_every_rank(comm, [&] { runs = plan_sweep(spec, false); });
  std::string plan;
  for (const SweepRun& r : runs) {
    plan += r.dir.string();
    for (const std::string& o : r.overrides) plan += " " + o;
    plan += "\n";
  }
  check_same_on_every_rank(comm, "the headlab build", build_fingerprint());
  check_same_on_every_rank(comm, "the sweep's runs", plan);
  on_root(comm, [&] {
    if (a.report_only) return;
    for (const SweepRun& r : runs) check_run_dir(r.dir, false);
    fs::create_directories(spec.out_dir);
  });
  return runs;
}

// Trains this rank's share of the runs (run i on rank i mod N) and gathers every outcome on
// rank 0, in run order, with its report data; `worst` becomes the worst exit code of all ranks.
std::vector<SweepOutcome> train_distributed(const SweepSpec& spec,
                                            const std::vector<SweepRun>& runs, const SweepArgs& a,
                                            std::vector<SweepRunData>& data, int& worst) {
  Comm& comm = world();
  const size_t n = static_cast<size_t>(comm.size()), me = static_cast<size_t>(comm.rank());
  std::vector<SweepRun> mine;
  for (size_t i = me; i < runs.size(); i += n) mine.push_back(runs[i]);
  json records = json::array();
  for (const SweepOutcome& o : train_runs(spec, mine, a, worst)) records.push_back(run_record(o));
  const std::vector<std::string> all =
      allgather_strings(comm, json{{"worst", worst}, {"runs", records}}.dump());
  std::vector<SweepOutcome> outcomes(runs.size());
  data.assign(runs.size(), SweepRunData{});
  for (size_t r = 0; r < n; ++r) {
    const json doc = json::parse(all[r]);
    worst = std::max(worst, doc.at("worst").get<int>());
    const json& rs = doc.at("runs");
    for (size_t k = 0; k < rs.size(); ++k) {
      const size_t i = r + k * n;
      outcomes[i] = outcome_from_record(rs[k], runs[i], data[i]);
    }
  }
  return outcomes;
}

int run_sweep(const SweepArgs& a) {
  SweepSpec spec;
  on_every_rank(world(), [&] { spec = make_spec(a); });
  const std::vector<SweepRun> runs = plan_on_every_rank(spec, a);
  int worst = kOk;
  std::vector<SweepOutcome> outcomes;
  std::vector<SweepRunData> data;
  if (a.report_only) {
    for (const SweepRun& run : runs) outcomes.push_back(collect_run(run));
  } else if (world().size() > 1) {
    outcomes = train_distributed(spec, runs, a, data, worst);
  } else {
    outcomes = train_runs(spec, runs, a, worst);
  }
  if (!speaks_for_job()) return worst;
  if (data.empty())
    write_sweep(spec, outcomes);
  else
    write_sweep(spec, outcomes, data);
  fmt::print("{}", sweep_to_csv(spec, outcomes));
  if (!a.report_only)
    fmt::print("wrote {}, {} and {}\n", (spec.out_dir / "sweep.json").string(),
               (spec.out_dir / "sweep.csv").string(), (spec.out_dir / "report.html").string());
  return worst;
}

}  // namespace

void add_sweep_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("sweep", "Train a grid of runs over config values and seeds");
  static SweepArgs a;
  cmd->add_option("CONFIG", a.config, "Base TOML config")->required();
  cmd->add_option("--over", a.over, "KEY=V1,V2,... (repeat for a grid over several keys)")
      ->required()
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("--seeds", a.seeds, "Seeds per setting: train.seed + 0 .. N-1")
      ->capture_default_str();
  cmd->add_option("--set", a.sets, "Override for every run, KEY=VALUE in TOML syntax")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("--out", a.out, "Sweep directory (default runs/sweep-<config name>)");
  cmd->add_option("--jobs", a.jobs, "Runs trained at the same time")->capture_default_str();
  cmd->add_flag("--no-progress", a.no_progress, "Only one line per finished run");
  cmd->add_flag("--report-only", a.report_only,
                "Train nothing: collect the runs already in the sweep directory and rewrite "
                "sweep.json, sweep.csv and report.html");
  cmd->callback([&exit_code] { exit_code = run_sweep(a); });
}

}  // namespace headlab::cli
