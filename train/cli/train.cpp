// `headlab train CONFIG`: load the plugins and the config and validate it, prepare the run
// directory (run.json records the plugins), train with progress on stderr, run the head
// analysis, print the summary on stdout.
//
// Every user mistake (bad option, unreadable or invalid config, a run directory that already
// holds a run, a checkpoint that does not fit) is found before the first step and before
// anything is printed, so main() reports it as the only stderr line.

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <spdlog/spdlog.h>

#include "core/error.h"
#include "train/cli/commands.h"
#include "train/cli/progress.h"
#include "train/config/config.h"
#include "train/run/run_dir.h"
#include "train/run/trainer.h"

namespace headlab::cli {
namespace {

namespace fs = std::filesystem;

// Ctrl-C: the first stops training after the current step, with a checkpoint to resume from;
// a second one kills the process (the default action is restored by SA_RESETHAND).
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

void install_sigint_handler() {
  struct sigaction action {};
  action.sa_handler = on_sigint;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESETHAND;
  sigaction(SIGINT, &action, nullptr);
}

struct TrainArgs {
  std::string config;
  std::vector<std::string> sets;
  std::vector<std::string> plugins;
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

int run_train(const TrainArgs& a) {
  const fs::path out =
      a.out.empty() ? fs::path("runs") / fs::path(a.config).stem() : fs::path(a.out);
  // Plugins first: the config may name their layers and tasks.
  load_plugin_flags(a.plugins);
  if (a.resume) load_run_plugins(out);
  Config config = load_config(a.config, a.sets);
  check_run_dir(out, a.resume);
  Trainer trainer(std::move(config), out);
  if (a.resume) trainer.resume();
  record_run_plugins(out);

  // Training starts: from here on stderr carries progress.
  use_stderr_logger();
  install_sigint_handler();
  TrainResult result;
  {
    InterruptibleProgress progress(stderr_is_tty() && !a.no_progress);
    result = trainer.run(&progress);
  }
  if (result.interrupted) {
    spdlog::warn("interrupted at step {}: checkpoint saved; continue with --resume --out {}",
                 result.steps, out.string());
    return kInterrupted;
  }
  // The head-analysis seam: heads.json, attention maps and report.html (train/cli/analyze.cpp).
  if (!a.no_analysis) analyze_after_train(trainer);
  print_summary(result, trainer.config());
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
  add_plugin_option(cmd, args.plugins);
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
