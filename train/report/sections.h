#pragma once
// The sections of the run and the sweep report (internal; see report.h for what each shows and
// how to add one). A section is a function from a page's view of its documents to HTML, listed
// in kRunSections (run_report.cpp) or kSweepSections (sweep_report.cpp).

#include <span>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "train/report/parts.h"
#include "train/report/report.h"

namespace headlab::report_parts {

// What the run report's sections read: the run's documents, heads.json flattened, the curves.
struct RunView {
  const RunFiles& files;
  Heads heads;
  Curves curves;
};

// Runs of a sweep that share their grid values (one "setting"), in sweep.json's order.
struct Group {
  std::string label;         // "model.heads=4"
  std::vector<size_t> runs;  // indices into sweep["runs"]
};

// What the sweep report's sections read.
struct SweepView {
  const nlohmann::json& sweep;            // sweep.json
  const nlohmann::json& runs;             // sweep["runs"]
  const std::vector<SweepRunData>& data;  // each run's own files, in runs' order
  std::vector<Group> groups;              // settings in grid order
  std::string over;                       // "model.heads, train.lr"
};

// Run report sections (body functions for SectionSpec<RunView>).
std::string summary_body(const RunView& v);
std::string curves_body(const RunView& v);
std::string specialization_body(const RunView& v);
std::string attention_body(const RunView& v);
std::string ablation_body(const RunView& v);
std::string table_body(const RunView& v);
// "timeline": s_match and each head's mass on its final relation against steps, the step each
// relation is first claimed (its assigned head's mass > 0.5) and the order of the claims, from
// timeline.jsonl. A note when the run has no timeline.
std::string timeline_body(const RunView& v);
// The step of a phase change in a series measured at `steps`: the first step whose value has
// gone at least half of the way from the first value to the last (either direction), so a slow
// drift before the change and noise after it do not move the mark much. -1 when the series is
// empty or does not move. Throws when the spans' sizes differ.
double midpoint_step(std::span<const double> steps, std::span<const double> values);
// The phase change of a next-token run from timeline.jsonl's "induction" rows; empty without.
std::string induction_phase_change(const std::vector<nlohmann::json>& timeline);
// "pruning": accuracy and component accuracy against heads pruned (heads.json "pruning"), each
// pruned head marked with the relation it carried, and whether the specialized heads were the
// last to go. A note when heads.json has no pruning curve.
std::string pruning_body(const RunView& v);
// "composition": for each head of layer >= 1 the lower head it composes with (heads.json
// "composition"), and the strongest two-step path drawn on each example sentence (the one picked in
// the attention explorer shown, kCompositionScript). "" for a one-layer model.
std::string composition_body(const RunView& v);
std::string files_body(const RunView& v);
// "patching": the head x relation map of the fraction of each relation's logit difference that
// patching the head's output from the clean sentence into the corrupted one restores (heads.json
// "patching", train/analysis/activation_patching.h), the mass assignment outlined on it, the
// measured tokens and logit differences, and each relation's residual-stream points. A note when
// the task cannot corrupt (patching null); "" for a heads.json written before patching.
std::string patching_body(const RunView& v);
// "best-heads": per relation the head with the highest argmax accuracy against the best
// fixed-offset head (heads.json "best_heads", Clark et al. 2019). "" when heads.json has none.
std::string best_heads_body(const RunView& v);

// The chance baselines of heads.json (docs/analysis.md, "Baselines"), all optional: a heads.json
// written before them has none, and each helper then gives NaN or "" (baselines_section.cpp).
// Head k's baseline `key` ("mass_uniform_baseline", "argmax_offset_baseline", ..) of relation r.
double head_baseline(const Heads& h, size_t k, const char* key, size_t r);
// "PREV 0.17, HEAD 0.17" of the first head's baseline `key`; with `offsets`, each relation's
// winning offset too ("PREV 1.00 at d = -1").
std::string baseline_list(const Heads& h, const char* key, bool offsets = false);
// heads.json's ablation-drop baseline (2 x the standard error of per-batch accuracy), or NaN.
double drop_baseline(const nlohmann::json& doc);
// The number of evaluation batches behind it, or 0.
int64_t spread_batches(const nlohmann::json& doc);
// A baseline beside a number in a table: " <span class="chance" title=..>(0.167)</span>", or ""
// for NaN.
std::string chance_note(double baseline, const char* title);
// heads.json's "patching" as the report reads it (patching_section.cpp). Every field is
// optional and a value that is null or not a number reads as NaN (undefined).
struct PatchingRelation {
  bool measured = false;                              // heads.json has an entry for the relation
  double tokens = NAN, clean = NAN, corrupted = NAN;  // measured tokens, mean logit differences
  std::vector<double> heads;                          // [L * H] layer-major, the fraction restored
  struct Point {
    std::string hook;  // "blocks.0.hook_resid_pre"
    double source = NAN, destination = NAN;
  };
  std::vector<Point> residual;
};
struct Patching {
  // absent: a heads.json written before patching; unavailable: "patching": null, the task makes
  // no corrupted sentences; measured: an object.
  enum class State { absent, unavailable, measured } state = State::absent;
  std::string seed;                         // the corruptions' seed, "" when absent
  std::vector<PatchingRelation> relations;  // [R], in Heads' order
};
Patching parse_patching(const nlohmann::json& doc, const Heads& h);
// The head (l * H + h) that restores the most of relation r's logit difference, the first of
// equals; -1 when no head's fraction is defined.
int patching_top(const Patching& p, size_t r);
// The attention explorer's script (attention_script.cpp): switches the sentence and the head
// of the maps drawn by attention_body, from the data embedded there.
extern const char* const kAttentionScript;
// Whether attention_body embeds the maps (#att-data) that the views below draw from.
bool attention_embedded(const RunFiles& f);
// "views": the model view and the head view of the picked sentence (views_section.cpp), drawn by
// kViewsScript (views_script.cpp) from #att-data. "" when the maps are not embedded.
std::string views_body(const RunView& v);
extern const char* const kViewsScript;
// The composition figure following the sentence menu (composition_section.cpp draws one figure
// per sentence) and the timeline's head toggles (follow_script.cpp).
extern const char* const kCompositionScript;
extern const char* const kTimelineScript;
// A group of checkboxes, one per series of the line chart before it (hidden until
// kTimelineScript shows them): each shows or hides its series (g.series[data-series]), with an
// "only" button per series and "all"; `label` names the group for a screen reader. Each box
// shows its short name (`shorts`, "L0 H1") with the series' full name as its tooltip and label.
std::string series_toggles(const std::string& label, const std::vector<std::string>& names,
                           const std::vector<std::string>& shorts,
                           const std::vector<std::string>& colors);

// Sweep report sections.
std::string sweep_table_body(const SweepView& v);
std::string sweep_seeds_body(const SweepView& v);
std::string sweep_curves_body(const SweepView& v);
std::string sweep_specialization_body(const SweepView& v);
// "claims": per run the step each relation is first claimed and their order (sweep.json's
// first_claims, claim_order), per setting whether every seed claimed in the same order
// (sweep_claims.cpp). "" when no run has a timeline.
std::string sweep_claims_body(const SweepView& v);
// "grid": for each pair of --over keys, heat maps of the share of seeds specialized, the mean
// eval accuracy and the lowest s_match, each cell linking to the list of its runs below
// (sweep_grid.cpp). "" for a sweep over fewer than two keys.
std::string sweep_grid_body(const SweepView& v);

// One cell of a pair of keys' heat maps: the runs with both values (whatever the other keys').
struct GridCell {
  std::vector<size_t> runs;  // indices into sweep["runs"], in their order
  size_t ok = 0, specialized = 0;
  double mean_accuracy = NAN, lowest_s_match = NAN;  // over the ok runs; NaN with none
};
struct SweepGrid {
  std::string row_key, col_key;                     // the slower key, the faster
  std::vector<std::string> row_values, col_values;  // value_text, in grid order
  std::vector<GridCell> cells;                      // [rows * cols], row-major
};
// Every pair of sweep["over"] keys (i < j), in order.
std::vector<SweepGrid> sweep_grids(const SweepView& v);
// Whether run i counts as specialized: sweep.json's "specialized", else is_specialized() of its
// numbers with heads.json's relations (a sweep.json written before the field).
bool run_specialized(const SweepView& v, size_t i);
// The claim orders of a setting's runs, most frequent first (ties in run order), with their
// counts; runs without one are left out.
std::vector<std::pair<std::string, size_t>> claim_orders(const SweepView& v, const Group& g);

// Sweep helpers shared by its sections.
struct Stats {
  double mean = NAN, sd = NAN, lo = NAN, hi = NAN;
  size_t n = 0;
};
Stats stats(const std::vector<double>& v);  // sd: the sample standard deviation (0 for n = 1)
// The numbers of runs[i][key] over the runs idx (absent and null values skipped).
std::vector<double> field(const nlohmann::json& runs, const std::vector<size_t>& idx,
                          const char* key);
// A grid value as text: strings bare, everything else as JSON.
std::string value_text(const nlohmann::json& v);
// The link to run i's report (relative to the sweep directory), or "" when it has none.
std::string run_link(const SweepView& v, size_t i);

}  // namespace headlab::report_parts
