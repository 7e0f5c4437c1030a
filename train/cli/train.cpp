// `headlab train CONFIG`: load and validate the config, prepare the run directory, train with
// progress on stderr, run the head analysis, print the summary on stdout.
//
// Every user mistake (bad option, unreadable or invalid config, a run directory that already
// holds a run, a checkpoint that does not fit) is found before the first step and before
// anything is printed, so main() reports it as the only stderr line.
//
// Under `mpirun -np N` every rank runs this with the same arguments: each loads the config,
// the ranks check that their configs and builds agree, rank 0 alone checks (and prepares) the
// run directory, and all train one model together (train/run/trainer.h). Rank 0 alone prints
// progress, writes the run directory, runs the head analysis and prints the summary.

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <spdlog/spdlog.h>

#include "core/error.h"
#include "train/cli/commands.h"
#include "train/cli/progress.h"
#include "train/cli/world.h"
#include "train/config/config.h"
#include "train/dist/agree.h"
#include "train/run/run_dir.h"
#include "train/run/trainer.h"

namespace headlab::cli {
namespace {

namespace fs = std::filesystem;

// Ctrl-C: the first stops training after the current step, with a checkpoint to resume from;
// a second one kills the process (the default action is restored by SA_RESETHAND). SIGUSR1
// does the same: mpirun forwards it to every rank (Ctrl-C on mpirun ends the job at once), and
// the ranks agree to stop after the same step.
constexpr int kInterrupted = 130;  // 128 + SIGINT, the shell's convention
volatile std::sig_atomic_t interrupted = 0;

void on_sigint(int) {
  interrupted = 1;
}

class InterruptibleProgress : public ProgressReporter {
 public:
  using ProgressReporter::ProgressReporter;
  bool should_stop() override { return interrupted != 0; }
};

// The ranks after the first print nothing; a signal still stops them (all ranks agree on it).
class Interruptible : public TrainObserver {
 public:
  bool should_stop() override { return interrupted != 0; }
};

void install_sigint_handler() {
  struct sigaction action {};
  action.sa_handler = on_sigint;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESETHAND;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGUSR1, &action, nullptr);
}

struct TrainArgs {
  std::string config;
  std::vector<std::string> sets;
  std::string out;
  bool resume = false;
  bool no_progress = false;
  bool no_analysis = false;
};

void print_summary(const TrainResult& r, const Config& c) {
  const EvalMetrics& e = r.final_eval;
  fmt::print("run: {}\n", r.run_dir.string());
  fmt::print("steps: {} (heads {}, seed {})\n", r.steps, c.model.heads, c.train.seed);
  fmt::print("train time: {:.2f} s ({:.1f} steps/s); wall time {:.2f} s\n", r.train_seconds,
             r.steps_per_second, r.wall_seconds);
  fmt::print("eval accuracy: {:.4f}  eval loss: {:.4f}  ({} tokens)\n", e.accuracy, e.loss,
             e.tokens);
  if (!e.relations.empty()) {
    std::string components;
    for (size_t i = 0; i < e.relations.size() && i < e.relation_accuracy.size(); ++i)
      components +=
          fmt::format("{}{} {:.4f}", i ? "  " : "", e.relations[i], e.relation_accuracy[i]);
    fmt::print("component accuracy: {}\n", components);
  }
  if (r.steps_to_95 >= 0)
    fmt::print("steps to 95%: {}\n", r.steps_to_95);
  else
    fmt::print("steps to 95%: never\n");
  std::fflush(stdout);
}

// Rank 0's part of preparing the run directory, before anything trains; the one place the
// directory is checked (and where a run-directory lock belongs): with several ranks, a refusal
// here stops every rank with rank 0's message.
void prepare_run_dir(const fs::path& out, bool resume) {
  on_root(world(), [&] { check_run_dir(out, resume); });
}

int run_train(const TrainArgs& a) {
  Comm& comm = world();
  Config config;
  on_every_rank(comm, [&] { config = load_config(a.config, a.sets); });
  check_ranks_agree(config);
  const fs::path out =
      a.out.empty() ? fs::path("runs") / fs::path(a.config).stem() : fs::path(a.out);
  prepare_run_dir(out, a.resume);
  std::unique_ptr<Trainer> trainer;
  on_every_rank(comm, [&] { trainer = std::make_unique<Trainer>(std::move(config), out, &comm); });
  if (a.resume) trainer->resume();

  // Training starts: from here on stderr carries progress (rank 0's).
  use_stderr_logger();
  install_sigint_handler();
  TrainResult result;
  if (speaks_for_job()) {
    InterruptibleProgress progress(stderr_is_tty() && !a.no_progress);
    result = trainer->run(&progress);
  } else {
    Interruptible quiet;
    result = trainer->run(&quiet);
  }
  if (result.interrupted) {
    if (speaks_for_job())
      spdlog::warn("interrupted at step {}: checkpoint saved; continue with --resume --out {}",
                   result.steps, out.string());
    return kInterrupted;
  }
  if (!speaks_for_job()) return kOk;
  // The head-analysis seam: heads.json, attention maps and report.html (train/cli/analyze.cpp).
  if (!a.no_analysis) analyze_after_train(*trainer);
  print_summary(result, trainer->config());
  return kOk;
}

}  // namespace

void add_train_command(CLI::App& app, int& exit_code) {
  auto* cmd =
      app.add_subcommand("train", "Train a model from a TOML config (see configs/README.md)");
  static TrainArgs args;
  cmd->add_option("CONFIG", args.config, "TOML config file, e.g. configs/dependency.toml")
      ->required();
  cmd->add_option("--set", args.sets,
                  "Override a config key with a TOML value, e.g. --set model.heads=8 or "
                  "--set optim.betas=[0.9,0.98] (repeatable; applied before validation)")
      ->type_name("KEY=VALUE")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("--out", args.out,
                  "Run directory (default: runs/<config file name without .toml>)")
      ->type_name("DIR");
  cmd->add_flag("--resume", args.resume,
                "Continue the run in the output directory from checkpoints/latest");
  cmd->add_flag("--no-progress", args.no_progress,
                "Plain log lines instead of a progress bar (the default when stderr is not a "
                "terminal)");
  cmd->add_flag("--no-analysis", args.no_analysis,
                "Skip the head analysis (heads.json, report.html) after training");
  cmd->callback([&exit_code] { exit_code = run_train(args); });
}

}  // namespace headlab::cli
