// `headlab analyze RUN_DIR`: loads the latest checkpoint and the resolved config of a run, runs
// the head analysis and writes heads.json, attention.npy (+ attention_tokens.json) and
// report.html into the run directory. Also the analysis step at the end of `headlab train`.

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "core/error.h"
#include "train/run/analyze_run.h"
#include "train/cli/commands.h"
#include "train/config/config.h"
#include "train/report/report.h"
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

}  // namespace

void analyze_after_train(Trainer& trainer) {
  const AnalysisResult r =
      analyze_run(trainer.run_dir(), trainer.model(), trainer.task(), trainer.config());
  std::fprintf(stderr, "%s", summary_text(r).c_str());
  std::fprintf(stderr, "analysis: wrote heads.json, attention.npy and report.html in %s\n",
               trainer.run_dir().string().c_str());
}

void add_analyze_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand(
      "analyze", "Head analysis of a trained run: heads.json, attention.npy, report.html");
  static std::string run_dir;
  static int64_t examples = 4;
  static int64_t batches = 0;
  static int64_t batch_size = 0;
  static bool report_only = false;
  cmd->add_option("RUN_DIR", run_dir, "Run directory written by `headlab train`")->required();
  cmd->add_option("--examples", examples, "Sentences whose attention maps go to attention.npy")
      ->capture_default_str();
  cmd->add_option("--batches", batches, "Evaluation batches (0: train.eval_batches)")
      ->capture_default_str();
  cmd->add_option("--batch-size", batch_size, "Sentences per batch (0: train.eval_batch_size)")
      ->capture_default_str();
  cmd->add_flag("--report-only", report_only,
                "Only rewrite report.html from the files already in RUN_DIR");
  cmd->callback([&exit_code] {
    const fs::path dir(run_dir);
    if (!fs::is_directory(dir)) fail("analyze: '{}' is not a directory", run_dir);
    // `headlab train` writes the resolved config first, so every run directory has one (a run
    // interrupted before its analysis too, whose report then shows what exists).
    const fs::path config_file = dir / "config.resolved.toml";
    if (!fs::exists(config_file)) {
      fail("analyze: '{}' has no config.resolved.toml; is it a run directory of `headlab train`?",
           run_dir);
    }
    if (report_only) {
      const fs::path report = write_run_report(dir);
      fmt::print("wrote {}\n", report.string());
      exit_code = kOk;
      return;
    }
    load_run_plugins(dir);  // the run's plugins, from run.json
    Trainer trainer(load_config(config_file), dir);
    trainer.resume();
    AnalysisOptions options;
    options.examples = examples;
    options.batches = batches;
    options.batch_size = batch_size;
    const AnalysisResult r =
        analyze_run(dir, trainer.model(), trainer.task(), trainer.config(), options);
    fmt::print("{}", summary_text(r));
    fmt::print("wrote {}, {}, {} and {}\n", (dir / "heads.json").string(),
               (dir / "attention.npy").string(), (dir / "attention_tokens.json").string(),
               (dir / "report.html").string());
    exit_code = kOk;
  });
}

}  // namespace headlab::cli
