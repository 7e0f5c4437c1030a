#pragma once
// HTML reports: one self-contained page each (inline CSS, SVG and JavaScript; nothing fetched,
// no server), readable straight from disk (file://). Pages are deterministic: rendering the same
// documents again gives the same bytes (no clock, no randomness).
//
// Run report (RUN_DIR/report.html), built from the files of a run directory only:
//   heads.json, attention.npy, attention_tokens.json   (train/analysis)
//   metrics.jsonl, timeline.jsonl, summary.json, config.resolved.toml  (the trainer)
// Its top line is the verdict (specialization_verdict). Sections, each a <section id=..>:
// "summary" (headline numbers, each relation's head), "curves" (loss, accuracy with per-relation
// component accuracy, learning rate), "timeline" (specialization over training, beside the
// curves), "specialization" (the head x relation mass matrix, the assignment outlined: solid
// when claimed, dashed grey when not), "patching" (activation patching: the head x relation map
// of the logit difference each head's clean output restores in the corrupted run, "n/a" where
// undefined, the measured tokens and logit differences, the residual stream's points; a note
// when the task cannot corrupt, left out for a heads.json without patching), "best-heads" (per relation the head with the best argmax
// accuracy against the best fixed-offset head; left out for a heads.json without baselines),
// "attention" (an explorer: pick one of the saved example
// sentences and a head; the head's map with tokens on both axes, gold partners outlined, a
// tooltip per cell with query, key and weight, and the maps of every head of its layer; drawn by
// a script from the weights embedded once as JSON, and statically for the first sentence and
// head when scripts are off), "views" (the model view: every layer x head as a small map of
// the picked sentence, click or Enter to open one in the explorer; the head view: the sentence
// twice with lines from query to key as opaque as the weight, several heads overlaid in their
// own colours, a hovered or focused token's lines alone), "ablation" (ablation, keep-only and importance bars;
// relation-group ablation matrix), "pruning" (the pruning curve), "composition" (two or more
// layers: two-step paths, drawn on the sentence the explorer picks), "heads" (every number per head, mean-ablation accuracy where
// heads.json has it), "files" (resolved config, versions,
// links to the run's files; in a sweep's run directory a link back to the sweep's report).
// The per-head timeline has a toggle per head ("only" one, "all"), and every chart of the run
// and the sweep report downloads as SVG or PNG with its title, legend and caption
// (chart_tools.h). A missing input file leaves its
// section with a note instead of failing. Unclaimed assignments (mass at or below heads.json's
// specialization.claim_threshold) are never drawn in their relation's colour. The chance
// baselines of heads.json (names ending in _baseline, docs/analysis.md) stand beside the numbers
// they qualify where present; a heads.json written before them renders as it did.
//
// Sweep report (DIR/report.html): see render_sweep_report.
//
// Adding a section (the specialization timeline from timeline.jsonl was added this way):
//   1. the document: a member of RunFiles, read in load_run_files (run_report.cpp); a missing
//      file leaves it empty;
//   2. the section: `std::string timeline_body(const RunView&)` in its own file
//      (train/report/timeline_section.cpp), declared in sections.h. It returns the HTML below the
//      title (parts.h: lede(), figure(), missing(); svg/svg.h: line_chart, heatmap, bar_chart,
//      strip_chart), or "" to leave the section out;
//   3. one row in kRunSections (run_report.cpp): {"timeline", "Specialization over training",
//      timeline_body}. The contents line and the section frame follow from the row. A section
//      that needs JavaScript names its script in the row's fourth field: a string of plain
//      inline code (see attention_script.cpp) that finds its elements by id, reads data the
//      section embedded as <script type="application/json">, and makes no requests;
//   4. a test in tests/train/test_report.cpp, and tests/train/report_browser.py if it has a
//      script.
// The sweep report works the same way (SweepView, kSweepSections in sweep_report.cpp).

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "train/io/json.h"
#include "train/io/npy.h"

namespace headlab {

struct RunFiles {
  std::string name;                      // the run directory's name
  nlohmann::json heads;                  // heads.json, or null
  nlohmann::json tokens;                 // attention_tokens.json, or null
  NpyArray attention;                    // attention.npy, empty if missing
  std::vector<nlohmann::json> metrics;   // metrics.jsonl rows (unparsable lines skipped)
  std::vector<nlohmann::json> timeline;  // timeline.jsonl rows (train/run/timeline.h)
  nlohmann::json summary;                // summary.json, or null
  nlohmann::json run;                    // run.json (provenance, plugins), or null
  std::string config_toml;               // config.resolved.toml, or ""
  std::vector<std::string> links;        // the run's own files that exist, linked from the page
  // The run directory lies in a sweep directory (its parent's .headlab marker says "sweep"):
  // that sweep's report.html relative to this page, which links back to it; else "".
  std::string sweep_report;
};

// Reads whatever of the files above exist. The analysis files (heads.json, attention.npy,
// attention_tokens.json) come from analysis_dir when it is given (an earlier checkpoint's
// analysis, RUN_DIR/analysis/step-NNNNNN), the trainer's from run_dir. Throws headlab::Error if
// a directory is missing, an existing heads.json / attention.npy is malformed, or the analysis
// files are not one set (train/analysis/analysis.h: heads.json records the step, the set's id
// and the digests of attention.npy and attention_tokens.json; a mix of two analyses, e.g. left
// by a kill between their renames, is refused naming the files, their steps and ids).
RunFiles load_run_files(const std::filesystem::path& run_dir,
                        const std::filesystem::path& analysis_dir = {});

// The page for one run.
std::string render_run_report(const RunFiles& files);

// The report's one-line verdict on a heads.json document, e.g. "3 of 3 relations have their
// own head: PREV L0H0 0.92, HEAD L0H3 0.77, SEM L0H2 0.93." or "2 of 3 relations have their own
// head: PREV L0H0 0.92, HEAD L0H1 0.81; unclaimed (mass <= 0.5): SEM L0H2 0.11." A relation
// with no head at all (fewer heads than relations) is listed as "no head: ...". With activation
// patching, each relation whose head by mass is not the head patching restores the most with
// follows ("PREV: mass names L0H2 (restores 0.05) but patching names L0H0 (0.94)."), or
// "Patching agrees."; then the composition, for two or more layers. "" when the document has no
// heads.
std::string specialization_verdict(const nlohmann::json& heads);

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
// The eval accuracy at which a run counts as having learned the task: summary.json's
// steps_to_95, the sweeps' "reached 95%" and "specialized", the dashed line of every accuracy
// chart and the report's good/bad cards.
inline constexpr double kLearnedAccuracy = 0.95;

// The first evaluation step with accuracy >= threshold; -1 if none.
double steps_to(const Curves& curves, double threshold = kLearnedAccuracy);

// A run counts as specialized (the sweeps' "specialized k of N", the README's tables) when it
// learned the task, every relation is claimed (n_claimed = the number of relations) and the
// best one-to-one assignment's mean mass s_match reaches kSpecializedSMatch.
inline constexpr double kSpecializedSMatch = 0.8;
inline bool is_specialized(double eval_accuracy, int64_t n_claimed, size_t relations,
                           double s_match) {
  return eval_accuracy >= kLearnedAccuracy && relations > 0 &&
         n_claimed == static_cast<int64_t>(relations) && s_match >= kSpecializedSMatch;
}

// The step at which each relation is first claimed over training: the first timeline.jsonl row
// (train/run/timeline.h) whose assignment gives the relation a head with mass > 0.5; nullopt
// when it never is (or the rows do not say). One entry per relation, in `relations`' order.
struct FirstClaim {
  std::string relation;
  std::optional<int64_t> step;
};
std::vector<FirstClaim> first_claims(const std::vector<nlohmann::json>& timeline,
                                     const std::vector<std::string>& relations);
// The order of the first claims in words: "HEAD → SEM → PREV", ties joined by " = " ("HEAD =
// SEM → PREV"), relations never claimed after a semicolon ("HEAD → SEM; PREV never"); "" when
// there are no relations. Two runs claimed in the same order exactly when the texts are equal.
std::string claim_order(const std::vector<FirstClaim>& claims);

// Sweep report, from sweep.json ({"config", "over", "seeds", "runs": [{"values", "seed", "dir",
// "ok", "eval_accuracy", "s_match", "s_max", "n_claimed", "steps_to_95", "train_seconds",
// "d_k", "specialized", "first_claims", "claim_order"}]}; the last three optional) and each run's
// files. Its header says what the grid is (sweep_description).
// Sections: "table" (one row per setting: mean and spread over seeds of eval accuracy, steps to
// 95%, s_match, n_claimed, specialized k of N, the most common claim order and on how many seeds,
// train seconds, and a link to each seed's report), "grid" (two or more --over keys: for each
// pair, heat maps of the share of seeds specialized, the mean eval accuracy and the lowest
// s_match, each cell linking to the list of its runs), "claims" (per run the step each relation
// is first claimed and their order; per setting whether its seeds agree), "seeds" (eval
// accuracy, s_match and n_claimed per setting, every seed a point that links to its run's
// report.html, the mean and spread drawn, the 0.95 threshold dashed), "curves" (eval accuracy
// per setting, one line per seed, and the seed means on one chart), "specialization" (the head x
// relation matrix of each setting's first seed).
struct SweepRunData {
  Curves curves;            // from the run's metrics.jsonl (empty if missing)
  nlohmann::json heads;     // the run's heads.json, or null
  bool has_report = false;  // the run directory holds a report.html (then linked)
};
// `runs` is in sweep.json's run order.
std::string render_sweep_report(const nlohmann::json& sweep, const std::vector<SweepRunData>& runs);
// What the grid is, in words true to sweep.json, e.g. "4 runs of tiny.toml: 2 settings of
// model.heads (1, 2) x 2 seeds each (train.seed 1, 2). Same d_model in every run, so more heads
// means narrower heads (d_k 64 down to 32)." The width sentence only when the grid varies the
// head count and the head width follows from it.
std::string sweep_description(const nlohmann::json& sweep);

// The head x relation mass heatmap of a heads.json document (the assigned relation named on
// each head); "" when the document has no heads.
std::string mass_matrix_svg(const nlohmann::json& heads, const std::string& title, int cell = 48);

// Shared page frame: <!DOCTYPE html> .. <style>..</style> .. body .. </html>; `script` (inline
// JavaScript, or "") runs at the end of the body.
std::string html_page(const std::string& title, const std::string& body,
                      const std::string& script = "");
// Colour of the relation at `index` in a document's "relations" (heads.json): a fixed palette
// by position, whatever the names. Okabe-Ito hues (vermillion, blue, reddish purple, bluish
// green, then the rest), darkened so that text in them reaches 4.5:1 on white (WCAG AA) and
// white text on them too; told apart under the common colour-vision deficiencies.
std::string relation_color(int index);
// The second cue of a relation, for readers who cannot tell its colour: a stroke-dasharray
// ("" = solid) for outlines on maps, and a marker shape (svg::Series::shape) on charts.
std::string relation_dash(int index);
std::string relation_shape(int index);
// Unclaimed and unassigned heads: a grey that is still 4.5:1 on white.
inline constexpr const char* kUnclaimedGrey = "#6b7280";

}  // namespace headlab
