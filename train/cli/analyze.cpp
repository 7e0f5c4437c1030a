// `headlab analyze RUN_DIR [--checkpoint NAME|PATH]`: loads a checkpoint of a run (the latest by
// default) and the config saved in it, runs the head analysis and writes heads.json,
// attention.npy (+ attention_tokens.json) and report.html into the run directory, or into
// RUN_DIR/analysis/step-NNNNNN/ for an earlier checkpoint. Also the analysis step at the end of
// `headlab train`. It writes into the run, so it claims it (train/run/run_dir.h): a run that is
// still training is refused ("in use by pid N").

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "core/error.h"
#include "train/cli/commands.h"
#include "train/cli/options.h"
#include "train/cli/output.h"
#include "train/config/config.h"
#include "train/io/files.h"
#include "train/report/report.h"
#include "train/run/analyze_run.h"
#include "train/run/checkpoint.h"
#include "train/run/run_checkpoint.h"
#include "train/run/run_dir.h"
#include "train/run/trainer.h"

namespace headlab::cli {
namespace {

namespace fs = std::filesystem;

// The specialization summary and the head x relation matrix as text.
std::string summary_text(const AnalysisResult& r) {
  std::string out =
      fmt::format("eval accuracy {:.4f}  s_match {:.3f}  s_max {:.3f}  n_claimed {} of {}\n",
                  r.eval.accuracy, r.specialization.s_match, r.specialization.s_max,
                  r.specialization.n_claimed, r.relations.size());
  out += fmt::format("{:<8}", "head");
  for (const std::string& rel : r.relations) out += fmt::format("{:>7}", rel);
  out += fmt::format("{:>9}{:>10}  assigned\n", "ablated", "import.");
  for (const HeadAnalysis& h : r.per_head) {
    out += fmt::format("{:<8}", fmt::format("L{} H{}", h.layer, h.head));
    for (double m : h.mass) out += fmt::format("{:>7.3f}", m);
    out += fmt::format("{:>9.3f}{:>10.3f}", h.ablation_accuracy, h.importance);
    for (size_t rel = 0; rel < r.relations.size(); ++rel) {
      const HeadRef a = r.specialization.assignment[rel];
      if (a.layer == h.layer && a.head == h.head) out += "  " + r.relations[rel];
    }
    out += "\n";
  }
  return out;
}

// Where the analysis of checkpoint `used` goes: the run directory for its latest checkpoint,
// RUN/analysis/step-NNNNNN/ for an earlier one (the run's own heads.json and report.html stay).
fs::path analysis_dir(const fs::path& run, const fs::path& used) {
  const std::optional<fs::path> latest = latest_checkpoint(run);
  std::error_code ec;
  if (latest && fs::equivalent(*latest, used, ec)) return run;
  return run / "analysis" / used.filename();
}

struct AnalyzeArgs {
  std::string run_dir;
  std::string checkpoint;
  int64_t examples = -1;  // -1: AnalysisOptions::kDefaultExamples, or fewer in a smaller batch
  int64_t batches = 0;
  int64_t batch_size = 0;
  bool report_only = false;
};

int run_analyze(const AnalyzeArgs& a) {
  const RunCheckpoint rc = resolve_run_checkpoint(a.run_dir, a.checkpoint);
  check_run_dir(rc.run_dir, RunDirUse::write);
  if (a.report_only) {
    fs::path dir = rc.run_dir;
    if (!rc.checkpoint.empty())
      dir = analysis_dir(rc.run_dir, find_checkpoint(rc.run_dir, rc.checkpoint));
    if (!fs::is_directory(dir)) fail("'{}' holds no analysis to report on", dir.string());
    // The files are checked before the claim (two analyses' files are refused, changing
    // nothing), and read again under it.
    load_run_files(rc.run_dir, dir == rc.run_dir ? fs::path{} : dir);
    const RunDirClaim claim = claim_run_dir(rc.run_dir, RunDirUse::write);  // it writes there
    // An earlier checkpoint's report reads its analysis there and the curves from the run.
    const fs::path report =
        dir == rc.run_dir ? write_run_report(rc.run_dir) : write_run_report(rc.run_dir, dir);
    fmt::print("wrote {}\n", report.string());
    return kOk;
  }
  load_run_plugins(rc.run_dir);  // the run's plugins, from run.json
  const CheckpointData c = load_run_checkpoint(rc);
  // The run's config, with the analysis' batches as evaluation keys: checked (the memory
  // estimate included) before any work.
  std::vector<std::string> sets;
  if (a.batches > 0) sets.push_back(fmt::format("train.eval_batches={}", a.batches));
  if (a.batch_size > 0) sets.push_back(fmt::format("train.eval_batch_size={}", a.batch_size));
  std::vector<std::string> origins;
  if (a.batches > 0) origins.push_back(fmt::format("--batches {}", a.batches));
  if (a.batch_size > 0) origins.push_back(fmt::format("--batch-size {}", a.batch_size));
  const fs::path used = c.dir;
  const Config config =
      parse_config(c.resolved_config, (used / "config.resolved.toml").string(), sets, origins);
  AnalysisOptions options;
  options.batches = a.batches;
  options.batch_size = a.batch_size;
  options.step = c.step;
  const int64_t batch = config.train.eval_batch_size;
  if (a.examples > batch)
    fail(
        "--examples = {} is more than the sentences of a batch ({}; --batch-size or "
        "train.eval_batch_size)",
        a.examples, batch);
  options.examples =
      a.examples >= 0 ? a.examples : std::min(AnalysisOptions::kDefaultExamples, batch);
  check_memory_now(config, MemoryUse::analyze, options.examples);
  RunModel model(config);
  model.restore(c, ConfigUse::evaluate, rc.run_dir);
  // Everything was checked: claim the run (a run still training is refused) and write.
  const RunDirClaim claim = claim_run_dir(rc.run_dir, RunDirUse::write);
  const fs::path out = analysis_dir(rc.run_dir, used);
  make_directories(out);
  const AnalysisResult r = analyze_run(rc.run_dir, model.encoder(), model.task(), model.config(),
                                       options, out == rc.run_dir ? fs::path{} : out);
  fmt::print("{}", summary_text(r));
  fmt::print(
      "analyzed {} (step {}); wrote heads.json, attention.npy, attention_tokens.json and "
      "report.html in {}\n",
      used.string(), c.step, out.string());
  return kOk;
}

}  // namespace

void report_train_analysis(const AnalysisResult& r, const fs::path& run_dir) {
  const std::string text =
      summary_text(r) +
      fmt::format("analysis: wrote heads.json, attention.npy and report.html in {}\n",
                  run_dir.string());
  Output::get().terminal(text);
  Output::get().log_lines(text);
}

void add_analyze_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand(
      "analyze", "Head analysis of a trained run: heads.json, attention.npy, report.html");
  static AnalyzeArgs a;
  add_path_option(*cmd, "RUN_DIR", a.run_dir, "Run directory written by `headlab train`",
                  "a run directory", kRunDirReserve)
      ->required();
  add_path_option(*cmd, "--checkpoint", a.checkpoint,
                  "Analyze this checkpoint (step-NNNNNN or a path to one) instead of the latest; "
                  "an earlier one is written into RUN_DIR/analysis/step-NNNNNN/",
                  kCheckpointExpected)
      ->type_name("NAME|PATH");
  add_int_option(
      *cmd, "--examples", a.examples, -1, 65536,
      fmt::format("Sentences whose attention maps go to attention.npy (-1: {}, at most a batch)",
                  AnalysisOptions::kDefaultExamples));
  add_int_option(*cmd, "--batches", a.batches, 0, 65536,
                 "Evaluation batches (0: train.eval_batches; a task's evaluation set: all of it, "
                 "else its first N)");
  add_int_option(*cmd, "--batch-size", a.batch_size, 0, 65536,
                 "Sentences per batch (0: train.eval_batch_size)");
  cmd->add_flag("--report-only", a.report_only,
                "Only rewrite report.html from the files already in RUN_DIR");
  cmd->footer(exit_codes_text());
  cmd->callback([&exit_code] { exit_code = run_analyze(a); });
}

}  // namespace headlab::cli
