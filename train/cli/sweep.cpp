// `headlab sweep CONFIG --over KEY=V1,V2,.. [--seeds N] [--set k=v].. [--plugin P].. [--out DIR]
// [--jobs N] [--resume [--skip-failed] | --report-only]`: a grid of training runs. Every run is this binary
// re-invoked as `headlab train CONFIG --set .. --plugin .. --out DIR/<run> --quiet` (it writes its
// own train.log; every plugin the sweep loaded is passed on by its absolute path), so runs
// are isolated processes and --jobs N runs N at once; they never outlive the sweep
// (train/cli/children.h). Every run's config is validated before the first starts. The sweep
// claims DIR (train/run/run_dir.h), logs to DIR/sweep.log and writes DIR/sweep.json, sweep.csv
// and report.html, also when it is interrupted; --resume continues it (complete runs are kept;
// every other run is resumed, one stopped before its analysis writes it; failed runs are
// trained again unless --skip-failed) and extends it with new values or seeds. The sweep
// exits 0 only when every run is complete (train/sweep/plan.h, RunState).
//
// Under `mpirun -np N`, run i is trained by rank i mod N (each rank --jobs at a time), as it
// would be alone: its `headlab train` child gets the environment without the MPI launcher's
// variables (train/cli/children.h), so it is a process of its own, not a rank. Rank 0 alone
// checks, claims and logs to the sweep directory; each rank sends its runs' figures and report
// data to rank 0 by message, and rank 0 writes sweep.json, sweep.csv and report.html, the same
// as one process would.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/threads.h"
#include "core/version.h"
#include "train/cli/children.h"
#include "train/cli/commands.h"
#include "train/cli/job.h"
#include "train/cli/options.h"
#include "train/cli/output.h"
#include "train/cli/signals.h"
#include "train/config/config.h"
#include "train/distributed/agree.h"
#include "train/distributed/world.h"
#include "train/plugins/loader.h"
#include "train/report/report.h"
#include "train/run/run_dir.h"
#include "train/sweep/collect.h"
#include "train/sweep/gather_runs.h"
#include "train/sweep/plan.h"

namespace headlab::cli {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

struct SweepArgs {
  std::string config;
  std::vector<std::string> over, sets, plugins;
  int64_t seeds = 1;
  std::string out;
  int64_t jobs = 1;
  bool no_progress = false;
  bool report_only = false;
  bool resume = false;
  bool skip_failed = false;
};

std::string self_path() {
  std::error_code ec;
  const fs::path p = fs::read_symlink("/proc/self/exe", ec);
  if (ec) fail("cannot find the headlab binary (/proc/self/exe: {})", ec.message());
  return p.string();
}

std::string values_text(const SweepRun& r) {
  std::string s;
  for (size_t k = 0; k < r.values.size(); ++k)
    s += r.values[k].first + "=" + r.plain_values[k] + " ";
  return s + fmt::format("seed={}", r.seed);
}

std::vector<std::string> train_args(const std::string& exe, const SweepSpec& spec,
                                    const SweepRun& run) {
  std::vector<std::string> args = {exe,     "train",          spec.config.string(),
                                   "--out", run.dir.string(), "--quiet"};
  if (run.state == RunState::resume) args.push_back("--resume");
  if (run.state == RunState::overwrite) args.push_back("--overwrite");
  for (const LoadedPlugin& p : loaded_plugins())
    args.insert(args.end(), {"--plugin", p.path.string()});
  for (const std::string& o : run.overrides) args.insert(args.end(), {"--set", o});
  return args;
}

// "sweep: " alone, "sweep: rank 1: " as a rank of a distributed sweep.
std::string line_prefix() {
  return world().size() > 1 ? fmt::format("sweep: rank {}: ", world().rank()) : "sweep: ";
}

void note_outcome(const SweepOutcome& o, size_t done, size_t n, double secs) {
  if (o.ok)
    Output::get().note(fmt::format(
        "{}[{}/{}] {}: eval accuracy {:.4f}, steps to 95% {}, s_match {:.3f}, n_claimed {} "
        "({:.0f} s)",
        line_prefix(), done, n, values_text(o.run), o.eval_accuracy,
        o.steps_to_95 ? std::to_string(*o.steps_to_95) : "never", o.s_match, o.n_claimed, secs));
  else
    Output::get().note(fmt::format("{}[{}/{}] {} failed: {}", line_prefix(), done, n,
                                   values_text(o.run), o.error));
}

// The outcome of a run whose `headlab train` exited with `code`, its last line `line`.
SweepOutcome finished_run(const SweepRun& run, int code, const std::string& line) {
  SweepOutcome o = collect_run(run);
  if (code == 0) return o;
  o.ok = false;
  if (code > 128)
    o.error = fmt::format("interrupted by {} (a checkpoint was saved: --resume continues it)",
                          signal_name(code - 128));
  else
    o.error = fmt::format("headlab train exited with code {}: {} (see {})", code,
                          line.empty() ? "no message" : line, (run.dir / "train.log").string());
  return o;
}

// The sweep's exit code after a run's: 3 if a run stopped on a non-finite value, else 1 if one
// failed otherwise (a crash, a signal the sweep did not send), else 2 if one was refused.
int worse(int worst, int code) {
  if (code == 0 || (code > 128 && stop_signal() != 0)) return worst;
  const int c = code == kNonFinite || code == kUsage ? code : kFailure;
  const auto rank = [](int x) { return x == kNonFinite ? 3 : x == kFailure ? 2 : x == kUsage; };
  return rank(c) > rank(worst) ? c : worst;
}

// Trains every run that is not done, `jobs` at a time; returns the outcomes in run order and
// sets `worst` to the sweep's exit code.
std::vector<SweepOutcome> train_runs(const SweepSpec& spec, const std::vector<SweepRun>& runs,
                                     const SweepArgs& a, int& worst) {
  const std::string exe = self_path();
  std::vector<SweepOutcome> outcomes(runs.size());
  std::vector<Clock::time_point> started(runs.size());
  ChildRuns children;
  size_t next = 0, done = 0;
  for (size_t i = 0; i < runs.size(); ++i) {
    outcomes[i].run = runs[i];
    outcomes[i].error = "not started: the sweep was interrupted";
  }
  worst = kOk;
  for (;;) {
    while (next < runs.size() && static_cast<int64_t>(children.running()) < a.jobs &&
           stop_signal() == 0) {
      const size_t i = next++;
      if (runs[i].state == RunState::done || runs[i].state == RunState::failed) {
        outcomes[i] = collect_run(runs[i]);
        if (runs[i].state == RunState::failed) {
          outcomes[i].ok = false;
          outcomes[i].error = "its last session failed; left as it is (--skip-failed)";
        }
        note_outcome(outcomes[i], ++done, runs.size(), 0);
        continue;
      }
      if (!a.no_progress)
        Output::get().note(fmt::format("{}[{}/{}] {} {}", line_prefix(), i + 1, runs.size(),
                                       runs[i].state == RunState::fresh ? "start" : "resume",
                                       values_text(runs[i])));
      started[i] = Clock::now();
      children.start(i, train_args(exe, spec, runs[i]));
    }
    const std::optional<ChildRuns::Exited> e = children.wait_one();
    if (!e) break;
    outcomes[e->index] = finished_run(runs[e->index], e->code, e->last_line);
    worst = worse(worst, e->code);
    note_outcome(outcomes[e->index], ++done, runs.size(),
                 std::chrono::duration<double>(Clock::now() - started[e->index]).count());
  }
  return outcomes;
}

// Once per sweep, from rank 0, before its runs start: the warning when the runs this rank trains
// at once (--jobs of its share) have more threads, together, than it has cores
// (sweep_binding_warning). Its runs are not ranks: their own `train` never warns.
void warn_of_binding(const SweepSpec& spec, const std::vector<SweepRun>& runs, int64_t jobs) {
  Comm& comm = world();
  if (!speaks_for_job() || launcher_name().empty()) return;
  int most = 1;
  int64_t mine = 0;
  for (size_t i = 0; i < runs.size(); ++i) {
    if (static_cast<int>(i % static_cast<size_t>(comm.size())) != comm.rank()) continue;
    ++mine;
    const SweepRun& r = runs[i];
    const int64_t t =
        load_config(spec.config, r.overrides, r.origins, spec.load_plugin).runtime.threads;
    most = std::max(most, t > 0 ? static_cast<int>(t) : hardware_threads());
  }
  if (const std::string w = sweep_binding_warning(most, std::min(jobs, mine)); !w.empty())
    std::fputs((w + "\n").c_str(), stderr);
}

SweepSpec make_spec(const SweepArgs& a) {
  SweepSpec spec;
  spec.config = a.config;
  for (const std::string& o : a.over) spec.over.push_back(parse_over(o));
  spec.seeds = a.seeds;
  spec.sets = a.sets;
  spec.load_plugin = load_config_plugin;
  spec.skip_failed = a.skip_failed;
  spec.out_dir = a.out.empty() ? fs::path("runs") / ("sweep-" + fs::path(a.config).stem().string())
                               : fs::path(a.out);
  return spec;
}

// Every rank validates every run's config; rank 0 alone checks the run directories (they are on
// its host) and tells the others what --resume does with each run. With several ranks they must
// agree on the build (plugins included) and on the runs.
std::vector<SweepRun> plan_on_every_rank(const SweepSpec& spec, SweepPlan plan) {
  Comm& comm = world();
  std::vector<SweepRun> runs;
  on_every_rank(comm, [&] { runs = plan_sweep(spec, comm.is_root() ? plan : SweepPlan::collect); });
  if (comm.size() == 1) return runs;
  std::string text, states;
  for (const SweepRun& r : runs) {
    text += r.dir.string();
    for (const std::string& o : r.overrides) text += " " + o;
    text += "\n";
    states += static_cast<char>('0' + static_cast<int>(r.state));
  }
  check_same_on_every_rank(comm, "the headlab build", build_fingerprint());
  check_same_on_every_rank(comm, "the sweep's runs", text);
  states = broadcast_string(comm, 0, states);
  for (size_t i = 0; i < runs.size(); ++i) runs[i].state = static_cast<RunState>(states[i] - '0');
  return runs;
}

// A distributed --resume, once rank 0 holds the sweep directory: each run's trainer (rank
// i mod N) gets the newest copy of it (gather_runs.h) and plans the run from the copy it will
// resume, which may be newer than rank 0's (a job killed before its gather) or come from a host
// new to the sweep. Returns how many copies rank 0 sent.
int resume_on_trainers(const SweepSpec& spec, std::vector<SweepRun>& runs) {
  Comm& comm = world();
  const size_t n = static_cast<size_t>(comm.size()), me = static_cast<size_t>(comm.rank());
  const int sent = send_run_dirs_to_trainers(comm, runs);
  std::string mine;
  on_every_rank(comm, [&] {
    for (size_t i = me; i < runs.size(); i += n) {
      if (me != 0) runs[i].state = resume_state(spec, runs[i]);
      mine += static_cast<char>('0' + static_cast<int>(runs[i].state));
    }
  });
  const std::vector<std::string> states = allgather_strings(comm, mine);
  for (size_t i = 0; i < runs.size(); ++i)
    runs[i].state = static_cast<RunState>(states[i % n].at(i / n) - '0');
  return sent;
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
    worst = worse(worst, doc.at("worst").get<int>());
    const json& rs = doc.at("runs");
    for (size_t k = 0; k < rs.size(); ++k) {
      const size_t i = r + k * n;
      outcomes[i] = outcome_from_record(rs[k], runs[i], data[i]);
    }
  }
  return outcomes;
}

// What the sweep prints at the end (rank 0); returns its exit code: 0 only when every run is
// complete (trained and analyzed), else the worst code of its runs, 1 for a run that is
// incomplete without one (a missing or unreadable heads.json, --skip-failed).
int finish_sweep(const SweepSpec& spec, const SweepArgs& a,
                 const std::vector<SweepOutcome>& outcomes, int worst) {
  fmt::print("{}", sweep_to_csv(spec, outcomes));
  if (!a.report_only)
    fmt::print("wrote {}, {} and {}\n", (spec.out_dir / "sweep.json").string(),
               (spec.out_dir / "sweep.csv").string(), (spec.out_dir / "report.html").string());
  flush_stdout();
  if (const int signal = stop_signal(); signal != 0 && !a.report_only) {
    size_t ok = 0;
    for (const SweepOutcome& o : outcomes) ok += o.ok;
    Output::get().final_line(fmt::format(
        "headlab: interrupted by {}: {} of {} runs finished, sweep.json written; continue with: "
        "{}",
        signal_name(signal), ok, outcomes.size(), resume_command(spec.out_dir)));
    return 128 + signal;
  }
  size_t incomplete = 0;
  const SweepOutcome* first = nullptr;
  for (const SweepOutcome& o : outcomes) {
    if (o.ok) continue;
    if (incomplete++ == 0) first = &o;
    if (worst == kOk) worst = kFailure;
  }
  if (first)
    Output::get().final_line(fmt::format(
        "headlab: sweep: {} of {} runs are not complete (first: {}: {}); {}", incomplete,
        outcomes.size(), first->run.dir.string(), first->error,
        a.skip_failed ? "--skip-failed left the failed ones"
                      : "continue with: " + resume_command(spec.out_dir, {"--report-only"})));
  return worst;
}

int run_sweep(const SweepArgs& a) {
  install_stop_handlers();
  Comm& comm = world();
  check_same_on_every_rank(
      comm, "the sweep command's choices",
      fmt::format("--out {} --resume {} --skip-failed {} --report-only {} --jobs {}\n",
                  shell_command({a.out}), a.resume, a.skip_failed, a.report_only, a.jobs));
  SweepSpec spec;
  on_every_rank(comm, [&] {
    if (a.resume && a.report_only)
      fail("--resume and --report-only exclude each other: --report-only trains nothing");
    if (a.skip_failed && !a.resume)
      fail("--skip-failed is a choice of --resume: add --resume, or leave --skip-failed out");
    load_plugin_flags(a.plugins);  // before the plan: the runs' configs may name their layers
    spec = make_spec(a);
  });
  const SweepPlan plan = a.report_only ? SweepPlan::collect
                         : a.resume    ? SweepPlan::resume
                                       : SweepPlan::fresh;
  // Checked before anything is created: the directory, then every run's config.
  // A sweep killed before it wrote its marker left its directory unclaimed: --resume starts it
  // as a fresh sweep would (--report-only has nothing to report there and refuses).
  const bool start =
      plan == SweepPlan::fresh || (plan == SweepPlan::resume && left_unclaimed(spec.out_dir));
  const RunDirUse use = start ? RunDirUse::create : RunDirUse::write;
  on_root(comm, [&] { check_run_dir(spec.out_dir, use, DirKind::sweep); });
  std::vector<SweepRun> runs = plan_on_every_rank(spec, plan);
  if (!a.report_only) warn_of_binding(spec, runs, a.jobs);
  RunDirClaim claim;
  on_root(comm, [&] {
    claim = claim_run_dir(spec.out_dir, use, DirKind::sweep);
    Output::get().open_log(spec.out_dir / "sweep.log");
    Output::get().log_lines(fmt::format("\n{}headlab {}: {}\n", time_stamp(), HEADLAB_VERSION,
                                        shell_command(command_line())));
  });
  if (plan == SweepPlan::resume && comm.size() > 1) {
    const int sent = resume_on_trainers(spec, runs);
    if (sent > 0)
      Output::get().log_lines(fmt::format(
          "{}sent {} run directories from {} to the ranks that resume them on their hosts\n",
          time_stamp(), sent, spec.out_dir.string()));
  }
  int worst = kOk;
  std::vector<SweepOutcome> outcomes;
  std::vector<SweepRunData> data;
  if (a.report_only) {
    if (comm.is_root())
      for (const SweepRun& run : runs) outcomes.push_back(collect_run(run));
  } else if (comm.size() > 1) {
    outcomes = train_distributed(spec, runs, a, data, worst);
    // Every run directory on rank 0's host, also without a shared filesystem.
    const int brought = gather_run_dirs(comm, runs);
    if (brought > 0)
      Output::get().log_lines(
          fmt::format("{}brought {} run directories from the other ranks' "
                      "hosts into {}\n",
                      time_stamp(), brought, spec.out_dir.string()));
  } else {
    outcomes = train_runs(spec, runs, a, worst);
  }
  if (!comm.is_root()) return worst;
  if (data.empty())
    write_sweep(spec, outcomes);
  else
    write_sweep(spec, outcomes, data);
  return finish_sweep(spec, a, outcomes, worst);
}

}  // namespace

void add_sweep_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("sweep", "Train a grid of runs over config values and seeds");
  static SweepArgs a;
  add_path_option(*cmd, "CONFIG", a.config, "Base TOML config", "a config file")->required();
  cmd->add_option("--over", a.over,
                  "KEY=V1,V2,... (repeat for a grid over several keys; values as --set takes "
                  "them: --over model.activation=relu,gelu)")
      ->required()
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  add_int_option(*cmd, "--seeds", a.seeds, 1, kMaxSeeds,
                 "Seeds per setting: train.seed + 0 .. N-1");
  add_set_option(*cmd, a.sets, "Override for every run, KEY=VALUE as for headlab train --set");
  add_plugin_option(cmd, a.plugins);
  // The sweep's runs are directories in it, each with a run's files.
  add_path_option(*cmd, "--out", a.out, "Sweep directory (default runs/sweep-<config name>)",
                  "a sweep directory; without --out the sweep goes to runs/sweep-<config name>",
                  kMaxRunNameBytes + 1 + kRunDirReserve)
      ->type_name("DIR");
  add_int_option(*cmd, "--jobs", a.jobs, 1, 256, "Runs trained at the same time");
  cmd->add_flag("--no-progress", a.no_progress, "Only one line per finished run");
  cmd->add_flag("--resume", a.resume,
                "Continue the sweep in --out: keep complete runs (trained and analyzed), resume "
                "incomplete ones (their analysis included), train failed ones again, start the "
                "rest (also new values or seeds)");
  cmd->add_flag("--skip-failed", a.skip_failed,
                "With --resume: leave the runs whose last session failed as they are (the sweep "
                "then exits non-zero) instead of training them again");
  cmd->add_flag("--report-only", a.report_only,
                "Train nothing: collect the runs already in the sweep directory and rewrite "
                "sweep.json, sweep.csv and report.html");
  cmd->footer(exit_codes_text() +
              " A sweep exits 0 only when every run is complete, trained and analyzed; else "
              "with the worst code of its runs (1 for a run left incomplete).");
  cmd->callback([&exit_code] { exit_code = run_sweep(a); });
}

}  // namespace headlab::cli
