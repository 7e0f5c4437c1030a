// `headlab sweep CONFIG --over KEY=V1,V2,.. [--seeds N] [--set k=v].. [--plugin P].. [--out DIR]
// [--jobs N]`: a grid of training runs. Every run re-invokes this binary as `headlab train CONFIG
// --set .. --plugin .. --out DIR/<run> --no-progress` (its output goes to DIR/<run>/train.log),
// so runs are isolated
// processes and --jobs N runs N at once. Every run's config is validated before the first
// starts. Writes DIR/sweep.json, DIR/sweep.csv and DIR/report.html.

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

#include "core/error.h"
#include "train/cli/commands.h"
#include "train/plugins/loader.h"
#include "train/sweep/sweep.h"

extern char** environ;

namespace headlab::cli {
namespace {

namespace fs = std::filesystem;

std::string self_path() {
  std::error_code ec;
  const fs::path p = fs::read_symlink("/proc/self/exe", ec);
  if (ec) fail("sweep: cannot find the headlab binary (/proc/self/exe: {})", ec.message());
  return p.string();
}

// Starts `headlab train` for one run with stdout and stderr going to <dir>/train.log. Every
// plugin the sweep loaded (--plugin; the config's own runtime.plugins reach the run through
// the config) is passed on by its absolute path.
pid_t start_run(const std::string& exe, const SweepSpec& spec, const SweepRun& run) {
  fs::create_directories(run.dir);
  std::vector<std::string> args = {exe,     "train",          spec.config.string(),
                                   "--out", run.dir.string(), "--no-progress"};
  for (const LoadedPlugin& p : loaded_plugins()) {
    args.push_back("--plugin");
    args.push_back(p.path.string());
  }
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
  const int rc = posix_spawn(&pid, exe.c_str(), &actions, nullptr, argv.data(), environ);
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
  std::vector<std::string> over, sets, plugins;
  int64_t seeds = 1;
  std::string out;
  int64_t jobs = 1;
  bool no_progress = false;
  bool report_only = false;
};

// The line printed when run i of n finished (or failed).
void print_outcome(const SweepOutcome& o, size_t done, size_t n, double secs) {
  if (o.ok) {
    std::fprintf(stderr,
                 "sweep: [%zu/%zu] %s: eval accuracy %.4f, steps to 95%% %s, s_match %.3f, "
                 "n_claimed %lld (%.0f s)\n",
                 done, n, values_text(o.run).c_str(), o.eval_accuracy,
                 o.steps_to_95 ? std::to_string(*o.steps_to_95).c_str() : "never", o.s_match,
                 static_cast<long long>(o.n_claimed), secs);
  } else {
    std::fprintf(stderr, "sweep: [%zu/%zu] %s failed: %s\n", done, n, values_text(o.run).c_str(),
                 o.error.c_str());
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
        std::fprintf(stderr, "sweep: [%zu/%zu] start %s\n", next + 1, runs.size(),
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

int run_sweep(const SweepArgs& a) {
  if (a.jobs < 1) fail("sweep: --jobs is {} but must be >= 1", a.jobs);
  if (!fs::exists(a.config)) fail("sweep: config file '{}' does not exist", a.config);
  load_plugin_flags(a.plugins);
  SweepSpec spec;
  spec.config = a.config;
  for (const std::string& o : a.over) spec.over.push_back(parse_over(o));
  spec.seeds = a.seeds;
  spec.sets = a.sets;
  spec.out_dir = a.out.empty() ? fs::path("runs") / ("sweep-" + fs::path(a.config).stem().string())
                               : fs::path(a.out);
  // Every config is checked before anything trains: exit 2 on a mistake.
  const std::vector<SweepRun> runs = plan_sweep(spec, !a.report_only);
  int worst = kOk;
  std::vector<SweepOutcome> outcomes;
  if (a.report_only) {
    for (const SweepRun& run : runs) outcomes.push_back(collect_run(run));
  } else {
    fs::create_directories(spec.out_dir);
    outcomes = train_runs(spec, runs, a, worst);
  }
  write_sweep(spec, outcomes);
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
  add_plugin_option(cmd, a.plugins);
  cmd->add_option("--out", a.out, "Sweep directory (default runs/sweep-<config name>)");
  cmd->add_option("--jobs", a.jobs, "Runs trained at the same time")->capture_default_str();
  cmd->add_flag("--no-progress", a.no_progress, "Only one line per finished run");
  cmd->add_flag("--report-only", a.report_only,
                "Train nothing: collect the runs already in the sweep directory and rewrite "
                "sweep.json, sweep.csv and report.html");
  cmd->callback([&exit_code] { exit_code = run_sweep(a); });
}

}  // namespace headlab::cli
