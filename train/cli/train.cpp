// `headlab train CONFIG`: load the plugins and the config and validate it, claim the run
// directory (run.json records how the run was made, its plugins included), train with progress
// on stderr (and in train.log), run the head analysis, print the summary on stdout.
//
// The session itself (the checks, the claim, run.json, training, the analysis) is library code,
// train/run/session.h, which headlab.train in Python runs too; this file adds the command line,
// train.log, the progress on stderr, the signals and the summary.
//
// Every user mistake (bad option, unreadable or invalid config, a run directory that holds a run
// or someone else's files, a checkpoint that does not fit) is found before the first step and
// before anything is printed, so main() reports it as the only stderr line. --dry-run then runs
// the model once (forward and backward on two sentences: a broken layer names itself), stops
// and says what the run would be.
//
// Under `mpirun -np N` every rank runs this with the same arguments: each loads the plugins and
// the config, the ranks check that their configs and builds (plugins included) agree, rank 0
// alone checks, claims and writes the run directory, and all train one model together
// (train/run/trainer.h). Rank 0 alone prints progress, runs the head analysis and prints the
// summary.

#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <spdlog/spdlog.h>

#include "core/error.h"
#include "core/version.h"
#include "train/analysis/analysis.h"
#include "train/cli/commands.h"
#include "train/cli/job.h"
#include "train/cli/options.h"
#include "train/cli/output.h"
#include "train/cli/progress.h"
#include "train/cli/signals.h"
#include "train/config/config.h"
#include "train/distributed/agree.h"
#include "train/distributed/share.h"
#include "train/run/run_dir.h"
#include "train/run/session.h"
#include "train/run/trainer.h"

namespace headlab::cli {
namespace {

namespace fs = std::filesystem;

struct TrainArgs {
  std::string config;
  std::vector<std::string> sets;
  std::vector<std::string> plugins;
  std::string out;
  bool resume = false;
  bool overwrite = false;
  bool dry_run = false;
  bool no_progress = false;
  bool no_analysis = false;
  bool quiet = false;
};

TrainRequest request_of(const TrainArgs& a) {
  TrainRequest r;
  r.config = a.config;
  r.sets = a.sets;
  r.plugins = a.plugins;
  r.out = a.out;
  r.resume = a.resume;
  r.overwrite = a.overwrite;
  r.no_analysis = a.no_analysis;
  r.dry_run = a.dry_run;
  r.command = command_line();
  return r;
}

fs::path out_dir(const TrainArgs& a) {
  return run_dir_of(request_of(a));
}

// `analysis_seconds`: the head analysis after the last step (0 without it), part of the run's
// wall time as the user waits for it.
std::string summary_text(const TrainResult& r, const Config& c, double analysis_seconds) {
  const EvalMetrics& e = r.final_eval;
  std::string s = fmt::format("run: {}\n", r.run_dir.string());
  s += fmt::format("steps: {} (heads {}, seed {})\n", r.steps, c.model.heads, c.train.seed);
  s += fmt::format("train time: {:.2f} s ({:.1f} steps/s); wall time {:.2f} s", r.train_seconds,
                   r.steps_per_second, r.wall_seconds + analysis_seconds);
  s += analysis_seconds > 0 ? fmt::format(" (the analysis {:.2f} s of it)\n", analysis_seconds)
                            : std::string("\n");
  s += fmt::format("eval accuracy: {:.4f}  eval loss: {:.4f}  ({} tokens)\n", e.accuracy, e.loss,
                   e.tokens);
  if (!e.relations.empty()) {
    std::string components;
    for (size_t i = 0; i < e.relations.size() && i < e.relation_accuracy.size(); ++i)
      components +=
          fmt::format("{}{} {:.4f}", i ? "  " : "", e.relations[i], e.relation_accuracy[i]);
    s += fmt::format("component accuracy: {}\n", components);
  }
  s += r.steps_to_95 >= 0 ? fmt::format("steps to 95%: {}\n", r.steps_to_95)
                          : std::string("steps to 95%: never\n");
  return s;
}

// --dry-run: what the run would be, on stdout; nothing is created.
int print_dry_run(const TrainArgs& a, Trainer& trainer, RunDirPlan plan) {
  const Config& c = trainer.config();
  const MemoryEstimate m = estimate_memory(c);
  const fs::path out = out_dir(a);
  const char* what = plan == RunDirPlan::create        ? "a new run directory"
                     : plan == RunDirPlan::adopt_empty ? "a new run in the empty directory"
                     : plan == RunDirPlan::overwrite   ? "a new run, replacing the run in"
                                                       : "the run continued in";
  fmt::print("config: {} (config hash {})\n", a.config, config_hash(c));
  fmt::print("parameters: {}\n", trainer.parameter_count());
  fmt::print("estimated memory: {:.3f} GiB (limit runtime.max_memory_gb = {})\n",
             m.total_bytes() / (1024.0 * 1024.0 * 1024.0), c.runtime.max_memory_gb);
  fmt::print("steps: {} to {} (batch {}, checkpoint every {}, keep {})\n", trainer.step() + 1,
             c.train.steps, c.train.batch_size, c.train.checkpoint_every, c.train.keep_checkpoints);
  fmt::print("would write: {} {}\n", what, out.string());
  fmt::print(
      "  config.resolved.toml, metrics.jsonl{}, train.log, run.json, checkpoints/, "
      "summary.json{}\n",
      c.train.timeline ? ", timeline.jsonl" : "",
      a.no_analysis ? "" : ", heads.json, attention.npy, attention_tokens.json, report.html");
  return kOk;
}

// The outcome line and exit code of a run that returned (the session's records and the analysis
// are written: run_training).
int finish(const TrainArgs& a, Trainer& trainer, const TrainOutcome& outcome, const fs::path& out) {
  const TrainResult& result = outcome.result;
  if (result.interrupted) {
    const int signal = stop_signal();
    Output::get().final_line(fmt::format(
        "headlab: interrupted by {} at step {}: checkpoint saved; continue with: {}",
        signal_name(signal), result.steps, resume_command(out, {"--overwrite", "--dry-run"})));
    return 128 + signal;
  }
  const std::string summary = summary_text(result, trainer.config(), outcome.analysis_seconds);
  fmt::print("{}", summary);
  flush_stdout();
  Output::get().log_lines(summary);
  if (const int signal = stop_signal(); signal != 0) {
    const std::string analysis = a.no_analysis ? ""
                                 : outcome.analysis_skipped
                                     ? fmt::format("; the analysis was skipped: headlab analyze {}",
                                                   shell_command({out.string()}))
                                     : std::string("; the analysis was written");
    Output::get().final_line(
        fmt::format("headlab: interrupted by {} after the last step: the "
                    "run is complete{}",
                    signal_name(signal), analysis));
    return 128 + signal;
  }
  return kOk;
}

// The ranks after the first print nothing; a stop signal still stops them (all ranks agree on
// it after each step).
class QuietRank : public TrainObserver {
 public:
  bool should_stop() override { return stop_signal() != 0; }
};

// What the CLI adds to the library's session (train/run/session.h).
class CliSessionHooks : public TrainSessionHooks {
 public:
  explicit CliSessionHooks(const TrainArgs& a) : args_(a) {}

  void load_plugins(const std::vector<std::string>& plugins) override {
    load_plugin_flags(plugins);
  }
  void check_memory(const Config& config, MemoryUse use, int64_t examples) override {
    check_memory_now(config, use, examples);
  }
  void config_loaded(const Config& config) override {
    check_ranks_agree(config);
    // Before the run starts: threads bound to fewer cores only share them (slower, same bits).
    if (const std::string w = binding_warning(static_cast<int>(config.runtime.threads));
        !w.empty() && speaks_for_job())
      std::fputs((w + "\n").c_str(), stderr);
  }
  // train.log, from the claim on.
  void run_dir_claimed(const fs::path& out) override {
    Output& output = Output::get();
    output.set_quiet(args_.quiet);
    output.open_log(out / "train.log");
    output.log_lines(fmt::format("\n{}headlab {}: {}\n", time_stamp(), HEADLAB_VERSION,
                                 shell_command(command_line())));
  }
  void note(const std::string& text) override { Output::get().note(text); }
  // The bar line ends before the analysis' text; the other ranks exit with rank 0's code.
  void trained(const TrainResult& /*result*/) override {
    if (progress) progress->finish();
    rank0_signal = stop_signal();
    if (world().size() > 1) broadcast_values(world(), 0, std::span<int>(&rank0_signal, 1));
  }
  std::string stop_reason() override {
    const int signal = stop_signal();
    return signal ? signal_name(signal) : "";
  }
  void analyzed(const AnalysisResult& result) override {
    report_train_analysis(result, run_dir_of(request_of(args_)));
  }

  ProgressReporter* progress = nullptr;
  int rank0_signal = 0;

 private:
  const TrainArgs& args_;
};

int run_train(const TrainArgs& a) {
  install_stop_handlers();
  Comm& comm = world();
  const TrainRequest request = request_of(a);
  const fs::path out = run_dir_of(request);
  CliSessionHooks hooks(a);
  RunDirPlan plan{};
  std::unique_ptr<Trainer> trainer = prepare_training(request, comm, hooks, plan);
  if (a.dry_run) {
    // After the checks, the model runs once (forward and backward, two sentences of the real
    // shapes): a layer that fails names itself here, not at step 1 of the real run.
    on_every_rank(comm, [&] { trainer->trial_step(2); });
    return speaks_for_job() ? print_dry_run(a, *trainer, plan) : kOk;
  }
  // From here on the directory is rank 0's until it exits.
  const RunDirClaim claim = start_training(request, comm, *trainer, hooks);
  use_output_logger();
  QuietRank quiet;
  std::optional<ProgressReporter> progress;
  if (speaks_for_job()) {
    progress.emplace(stderr_is_tty() && !a.no_progress && !a.quiet);
    hooks.progress = &*progress;
  }
  TrainObserver& observer = progress ? static_cast<TrainObserver&>(*progress) : quiet;
  const TrainOutcome outcome = run_training(request, comm, *trainer, observer, hooks);
  if (speaks_for_job()) return finish(a, *trainer, outcome, out);
  // The other ranks stopped after the same step as rank 0, which says why.
  return outcome.result.interrupted ? 128 + hooks.rank0_signal : kOk;
}

}  // namespace

void add_train_command(CLI::App& app, int& exit_code) {
  auto* cmd =
      app.add_subcommand("train", "Train a model from a TOML config (see configs/README.md)");
  static TrainArgs args;
  add_path_option(*cmd, "CONFIG", args.config, "TOML config file, e.g. configs/dependency.toml",
                  "a config file")
      ->required();
  add_set_option(*cmd, args.sets,
                 "Override a config key, e.g. --set model.heads=8, --set model.norm=post or "
                 "--set optim.betas=0.9,0.98 (TOML values work too; repeatable; applied before "
                 "validation)");
  add_plugin_option(cmd, args.plugins);
  add_path_option(
      *cmd, "--out", args.out, "Run directory (default: runs/<config file name without .toml>)",
      "a run directory; without --out the run goes to runs/<config name>", kRunDirReserve)
      ->type_name("DIR");
  cmd->add_flag("--resume", args.resume,
                "Continue the run in the output directory from checkpoints/latest");
  cmd->add_flag("--overwrite", args.overwrite,
                "Replace the run in the output directory (only a run directory headlab created)");
  cmd->add_flag("--dry-run", args.dry_run,
                "Check everything, run the model once (forward and backward on two sentences), "
                "print the parameter count, memory estimate, steps and what would be written, "
                "and exit without creating anything");
  cmd->add_flag("--no-progress", args.no_progress,
                "Plain log lines instead of a progress bar (the default when stderr is not a "
                "terminal)");
  cmd->add_flag("--quiet", args.quiet,
                "Nothing on stderr but the final error or interrupt line (train.log has all)");
  cmd->add_flag("--no-analysis", args.no_analysis,
                "Skip the head analysis (heads.json, report.html) after training");
  cmd->footer(exit_codes_text());
  cmd->callback([&exit_code] { exit_code = run_train(args); });
}

}  // namespace headlab::cli
