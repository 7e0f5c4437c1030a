// `headlab train CONFIG`: load the plugins and the config and validate it, claim the run
// directory (run.json records how the run was made, its plugins included), train with progress
// on stderr (and in train.log), run the head analysis, print the summary on stdout.
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

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
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
#include "train/plugins/loader.h"
#include "train/run/checkpoint.h"
#include "train/run/run_dir.h"
#include "train/run/run_json.h"
#include "train/run/trainer.h"
#include "train/run/vocab_file.h"

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

fs::path out_dir(const TrainArgs& a) {
  return a.out.empty() ? fs::path("runs") / fs::path(a.config).stem() : fs::path(a.out);
}

RunDirUse dir_use(const TrainArgs& a) {
  return a.resume ? RunDirUse::write : a.overwrite ? RunDirUse::overwrite : RunDirUse::create;
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

// The outcome line and exit code of a run that returned.
int finish(const TrainArgs& a, Trainer& trainer, const TrainResult& result, const fs::path& out) {
  int rank0_signal = stop_signal();  // the other ranks exit with rank 0's code (run_train)
  if (world().size() > 1) broadcast_values(world(), 0, std::span<int>(&rank0_signal, 1));
  if (result.interrupted) {
    const int signal = stop_signal();
    record_session_end(out, fmt::format("interrupted by {}", signal_name(signal)), result.steps);
    Output::get().final_line(fmt::format(
        "headlab: interrupted by {} at step {}: checkpoint saved; continue with: {}",
        signal_name(signal), result.steps, resume_command(out, {"--overwrite", "--dry-run"})));
    return 128 + signal;
  }
  // The head-analysis seam: heads.json, attention maps and report.html (train/cli/analyze.cpp).
  // A stop signal after the last step: the run is complete; the analysis is skipped if it had
  // not started, or finishes (its files are written whole) and the signal is reported after it.
  const bool skip_analysis = stop_signal() != 0;
  const auto analysis_start = std::chrono::steady_clock::now();
  if (!a.no_analysis && !skip_analysis) analyze_after_train(trainer);
  const double analysis_seconds =
      a.no_analysis || skip_analysis
          ? 0.0
          : std::chrono::duration<double>(std::chrono::steady_clock::now() - analysis_start)
                .count();
  const std::string summary = summary_text(result, trainer.config(), analysis_seconds);
  fmt::print("{}", summary);
  flush_stdout();
  Output::get().log_lines(summary);
  record_session_end(out, "finished", result.steps);
  if (const int signal = stop_signal(); signal != 0) {
    const std::string analysis = a.no_analysis ? ""
                                 : skip_analysis
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

// --resume: the plugins the run was trained with. Rank 0 reads them from run.json; the other
// ranks load the same files (on their host, at the same path), checked against the same digests.
void load_plugins_of_run(Comm& comm, const fs::path& out) {
  std::string list;
  on_root(comm, [&] {
    load_run_plugins(out);
    for (const LoadedPlugin& p : loaded_plugins()) list += p.path.string() + "\n" + p.sha256 + "\n";
  });
  if (comm.size() == 1) return;
  list = broadcast_string(comm, 0, list);
  on_every_rank(comm, [&] {
    for (size_t at = 0; at < list.size();) {
      const size_t path_end = list.find('\n', at), sha_end = list.find('\n', path_end + 1);
      load_plugin(list.substr(at, path_end - at),
                  list.substr(path_end + 1, sha_end - path_end - 1));
      at = sha_end + 1;
    }
  });
}

// Everything before the run directory is claimed: the directory checked (rank 0), the plugins,
// the config, the ranks' agreement, the model and a resumed checkpoint.
std::unique_ptr<Trainer> prepare(const TrainArgs& a, RunDirPlan& plan) {
  Comm& comm = world();
  const fs::path out = out_dir(a);
  // The choices the config does not hold: a rank started with --resume beside ranks without it
  // would read another checkpoint (the config itself is compared below).
  check_same_on_every_rank(
      comm, "the train command's choices",
      fmt::format("--out {} --resume {} --overwrite {} --dry-run {} --no-analysis {}\n",
                  shell_command({out.string()}), a.resume, a.overwrite, a.dry_run, a.no_analysis));
  on_every_rank(comm, [&] {
    if (a.resume && a.overwrite)
      fail(
          "--resume and --overwrite exclude each other: --resume continues the run, --overwrite "
          "replaces it");
  });
  // The directory is checked before anything in it is read (a resume reads run.json for its
  // plugins), then the plugins are loaded: the config may name their layers and tasks.
  on_root(comm, [&] { plan = check_run_dir(out, dir_use(a)); });
  on_every_rank(comm, [&] { load_plugin_flags(a.plugins); });
  if (a.resume) load_plugins_of_run(comm, out);
  Config config;
  on_every_rank(comm, [&] { config = load_config(a.config, a.sets, {}, load_config_plugin); });
  check_ranks_agree(config);
  // The memory the run and its analysis will need, against what this machine has, before the
  // model is built (a --dry-run builds it too).
  on_every_rank(comm, [&] {
    check_memory_now(config);
    if (!a.no_analysis)
      check_memory_now(config, MemoryUse::analyze,
                       std::min(AnalysisOptions::kDefaultExamples, config.train.eval_batch_size));
  });
  // Building the model writes nothing and finds what only the layers can check; the checkpoint
  // is checked before anything is written too.
  std::unique_ptr<Trainer> trainer;
  on_every_rank(comm, [&] { trainer = std::make_unique<Trainer>(std::move(config), out, &comm); });
  if (a.resume) trainer->resume(ConfigUse::resume);
  return trainer;
}

// Rank 0's part once the directory is claimed: train.log, run.json's session and plugins.
void open_run_files(const TrainArgs& a, const Trainer& trainer, const fs::path& out) {
  Output& output = Output::get();
  output.set_quiet(a.quiet);
  output.open_log(out / "train.log");
  output.log_lines(fmt::format("\n{}headlab {}: {}\n", time_stamp(), HEADLAB_VERSION,
                               shell_command(command_line())));
  record_session_start(out, command_line(), trainer.step());
  record_run_plugins(out);
  record_run_data_files(out, trainer.config());
  write_run_vocabulary(out, trainer.task());
}

int run_train(const TrainArgs& a) {
  install_stop_handlers();
  Comm& comm = world();
  const fs::path out = out_dir(a);
  RunDirPlan plan{};
  std::unique_ptr<Trainer> trainer = prepare(a, plan);
  if (a.dry_run) {
    // After the checks, the model runs once (forward and backward, two sentences of the real
    // shapes): a layer that fails names itself here, not at step 1 of the real run.
    on_every_rank(comm, [&] { trainer->trial_step(2); });
    return speaks_for_job() ? print_dry_run(a, *trainer, plan) : kOk;
  }
  // From here on the directory is rank 0's until it exits.
  RunDirClaim claim;
  bool newer = false;
  on_root(comm, [&] {
    claim = claim_run_dir(out, dir_use(a));
    // A writer that finished just before the claim may have saved a newer checkpoint.
    if (!a.resume) return;
    const std::optional<fs::path> latest = latest_checkpoint(out);
    newer = !latest || latest->filename() != checkpoint_dir_name(trainer->step());
  });
  if (any_rank(comm, newer)) trainer->resume(ConfigUse::resume);
  if (speaks_for_job()) {
    open_run_files(a, *trainer, out);
    // Left alone by the saves' cleanup, and said once (--overwrite refuses such a run).
    if (const std::string foreign = foreign_checkpoint_entry(out); !foreign.empty())
      Output::get().note(fmt::format("note: '{}' was not written by headlab; it is left as it is",
                                     (out / foreign).string()));
  }
  use_output_logger();
  TrainResult result;
  try {  // training and (rank 0) the analysis: a failure of either is the session's outcome
    if (speaks_for_job()) {
      {
        ProgressReporter progress(stderr_is_tty() && !a.no_progress && !a.quiet);
        result = trainer->run(&progress);
      }  // the bar line ends before the summary
      return finish(a, *trainer, result, out);
    }
    QuietRank quiet;
    result = trainer->run(&quiet);
  } catch (const std::exception& e) {
    if (speaks_for_job()) try {
        record_session_end(out, std::string("failed: ") + e.what(), trainer->step());
      } catch (const std::exception&) {  // the first error is the one to report
      }
    throw;
  }
  // The other ranks stopped after the same step as rank 0, which says why.
  int signal = stop_signal();
  broadcast_values(comm, 0, std::span<int>(&signal, 1));
  return result.interrupted ? 128 + signal : kOk;
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
