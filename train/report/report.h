#pragma once
// HTML reports: one self-contained page each (inline CSS and SVG, no scripts, nothing fetched
// from the network), readable straight from disk.
//
// Run report (RUN_DIR/report.html), built from the files of a run directory:
//   heads.json, attention.npy, attention_tokens.json   (train/analysis/analysis.h)
//   metrics.jsonl, timeline.jsonl, summary.json, config.resolved.toml  (the trainer)
// Sections (each a <section id=..>): "summary" (headline numbers), "curves" (loss, accuracy
// with per-relation component accuracy, learning rate), "specialization" (the head x relation
// mass matrix with the assigned relation named on each head, distinct-partner mass, argmax
// accuracy), "attention" (each head's map on an example sentence, tokens on both axes, gold
// partners outlined), "ablation" (ablation, keep-only and importance bars; relation-group
// ablation matrix), "timeline" (specialization over training), "pruning" (the pruning curve),
// "composition" (two or more layers: two-step paths), "heads" (every number per head), "config"
// (resolved config, versions); the sections of the analysis are listed in sections.h.
// A missing input file leaves its section with a note instead of failing.
//
// Sweep report (DIR/report.html): see render_sweep_report.

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "train/io/json.h"
#include "train/io/npy.h"

namespace headlab {

struct RunFiles {
  std::string name;                     // the run directory's name
  nlohmann::json heads;                 // heads.json, or null
  nlohmann::json tokens;                // attention_tokens.json, or null
  NpyArray attention;                   // attention.npy, empty if missing
  std::vector<nlohmann::json> metrics;  // metrics.jsonl rows (unparsable lines skipped)
  std::vector<nlohmann::json> timeline;  // timeline.jsonl rows (train/run/timeline.h)
  nlohmann::json summary;               // summary.json, or null
  std::string config_toml;              // config.resolved.toml, or ""
};

// Reads whatever of the files above exist. The analysis files (heads.json, attention.npy,
// attention_tokens.json) come from analysis_dir when it is given (an earlier checkpoint's
// analysis, RUN_DIR/analysis/step-NNNNNN), the trainer's from run_dir. Throws headlab::Error if
// a directory is missing or an existing heads.json / attention.npy is malformed.
RunFiles load_run_files(const std::filesystem::path& run_dir,
                        const std::filesystem::path& analysis_dir = {});

// The page for one run.
std::string render_run_report(const RunFiles& files);

// load_run_files + render_run_report, written to report.html in analysis_dir (when given) or
// run_dir; returns that path. Throws headlab::Error on an I/O failure.
std::filesystem::path write_run_report(const std::filesystem::path& run_dir,
                                       const std::filesystem::path& analysis_dir = {});

// Points of a metrics.jsonl stream, split into training and evaluation rows. A row counts as
// evaluation when it has "eval": true, "split"/"kind"/"type" equal to "eval", or an
// "eval_accuracy" key; its accuracy and loss are read from "eval_accuracy"/"eval_loss" or
// "accuracy"/"loss", and per-relation component accuracies from "component_accuracy" or
// "eval_component_accuracy" (an object keyed by relation, or an array in relation order).
struct Curves {
  std::vector<double> step, loss, accuracy, lr;             // training rows
  std::vector<double> eval_step, eval_loss, eval_accuracy;  // evaluation rows
  std::vector<std::vector<double>> eval_component;          // [R][eval rows] (NaN if absent)
};
Curves read_curves(const std::vector<nlohmann::json>& rows,
                   const std::vector<std::string>& relations);
// The first evaluation step with accuracy >= threshold; -1 if none.
double steps_to(const Curves& curves, double threshold = 0.95);

// Sweep report: the table of sweep.json's runs grouped by their values (mean and spread over
// seeds of eval accuracy, steps to 95%, s_match, n_claimed, train seconds), eval-accuracy
// curves per group (one line per seed, and the seed mean of every group on one chart),
// specialization per group (s_match, s_max and n_claimed, each seed a dot) and the head x
// relation matrix of each group's first seed.
struct SweepRunData {
  Curves curves;         // from the run's metrics.jsonl (empty if missing)
  nlohmann::json heads;  // the run's heads.json, or null
};
// `runs` is in sweep.json's run order.
std::string render_sweep_report(const nlohmann::json& sweep, const std::vector<SweepRunData>& runs);

// The head x relation mass heatmap of a heads.json document (the assigned relation named on
// each head); "" when the document has no heads.
std::string mass_matrix_svg(const nlohmann::json& heads, const std::string& title, int cell = 48);

// Shared page frame: <!DOCTYPE html> .. <style>..</style> .. body .. </html>.
std::string html_page(const std::string& title, const std::string& body);
// Colour of the relation at `index` in a document's "relations" (heads.json): a fixed palette
// by position, whatever the names.
std::string relation_color(int index);

}  // namespace headlab
