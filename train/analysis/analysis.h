#pragma once
// Head analysis of a trained Encoder on a task with gold partners (docs/task.md, "Metrics").
//
// On evaluation batches (the config's eval stream: train.eval_seed, batch k = 0..n-1, by
// default train.eval_batches x train.eval_batch_size sentences; for a task with an evaluation
// set, that set in order, the first `batches` batches of it when batches is given), with the
// model in eval mode:
//   - per layer and head: mass M[l,h,r], distinct-partner mass, argmax accuracy, confidence,
//     entropy (train/analysis/head_metrics.h);
//   - ablation accuracy (that head's output replaced at hook_z: by 0, and by its mean output)
//     and keep-only accuracy (only that head kept in its layer), with the per-relation
//     component accuracies of each (head_gates.h: every gate acts through the hook points);
//   - importance I_{l,h} = mean over batches |dL/dg_{l,h}| at g = 1 (the gate at hook_z), L being the mean token
//     cross-entropy of a batch, then L2-normalised within each layer (Michel et al. 2019);
//   - the specialization summary (s_max, s_match, n_claimed, assignment);
//   - relation-group ablation: for each relation r, every head whose largest mass is on r and
//     above 0.3 gated off together; the R x R drop in component accuracy;
//   - the pruning curve: heads removed one at a time, least important first, importance
//     recomputed after each removal (train/analysis/pruning.h); importance is |dL/dg|, the loss
//     rise under mean ablation or the patching map's, as train.pruning_importance says;
//   - with two or more layers, composition: for each head of layer >= 1, the head below it
//     whose attention it continues (two-step paths) and the mass it loses without each lower
//     head (train/analysis/composition.h);
//   - activation patching (activation_patching.h): per relation, the fraction of the clean-minus-
//     corrupted logit difference each head's output restores, and the residual stream's, when
//     the task makes corrupted copies (Task::corrupt);
//   - for a next-token task, the previous-token, duplicate-token and induction detectors, the
//     in-context score and K-composition (train/analysis/induction.h);
//   - attention maps of the first `examples` sentences of eval batch 0, per layer and head;
//   - chance baselines beside the scores (train/analysis/baselines.h): per relation the mass of
//     a uniform head and the argmax accuracy of the best fixed-offset head, the uniform-Y path
//     mass of each composition, the spread of accuracy across batches for ablation drops, and
//     the best head per relation against its offset baseline.
// The model's gates are restored to ones and its gradients zeroed before returning.
//
// Files (write_analysis):
//   heads.json             the shape: {"relations", "layers": [{"layer", "heads": [{"head",
//                          "mass", "argmax_accuracy", "entropy", "confidence",
//                          "ablation_accuracy", "keep_only_accuracy", "importance", ...}]}],
//                          "specialization": {"s_max", "s_match", "n_claimed",
//                          "claim_threshold", "assignment"},
//                          "eval_accuracy", ...} plus mass_distinct, component accuracies,
//                          relation groups and the group-ablation matrix, "pruning": [{
//                          "heads_pruned", "pruned": [layer, head] (null at 0), "accuracy",
//                          "component_accuracy"}], "composition": [{"layer", "head",
//                          "relation", "composes_with": [layer, head], "path_mass", "mass",
//                          "sources": [{"layer", "head", "path_mass", "ablated_mass"}]}]
//                          (empty for one layer).
//                          Chance baselines (names ending in _baseline): each head and the
//                          top-level "baselines" carry "mass_uniform_baseline",
//                          "mass_distinct_uniform_baseline", "argmax_offset_baseline",
//                          "argmax_offset_baseline_offset" (by relation) and
//                          "ablation_drop_baseline"; each composition entry and source
//                          "path_mass_baseline", the entry "claimed"; top level
//                          "eval_accuracy_spread": {"sd", "standard_error", "batches"} and
//                          "best_heads": {relation: {"head": [layer, head], "argmax_accuracy",
//                          "argmax_offset_baseline", "argmax_offset_baseline_offset",
//                          "margin"}}.
//   attention.npy          float32 [examples, layers, heads, T, T] (.npy v1.0)
//   attention_tokens.json  {"shape", "relations", "examples": [{"tokens": ["BOS", "SUBJ:2", ..],
//                          "partners": {"PREV": [-1, 0, ..], ..}, "labels", "predicted"}]}

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "train/analysis/activation_patching.h"
#include "train/analysis/baselines.h"
#include "train/analysis/composition.h"
#include "train/analysis/head_metrics.h"
#include "train/analysis/induction.h"
#include "train/analysis/pruning.h"

namespace headlab {

class Encoder;
class Task;
struct Config;

struct AnalysisOptions {
  // 0 = take from the config (train.eval_batches, train.eval_batch_size, train.eval_seed).
  int64_t batches = 0;
  int64_t batch_size = 0;
  int64_t seed = -1;  // < 0: train.eval_seed
  // Sentences whose attention maps are kept in attention.npy (<= batch size).
  int64_t examples = kDefaultExamples;
  static constexpr int64_t kDefaultExamples = 4;
  double group_min_mass = 0.3;
  double claim_threshold = 0.5;
  // The step of the checkpoint analyzed (-1: unknown), recorded in the analysis' files.
  int64_t step = -1;
  // Gated and patched forwards start at the ungated run's values where their edits begin
  // (head_gates.h, Hooks::start_at); false runs each of them whole: the same numbers, slower.
  bool start_at_clean_values = true;
};

struct HeadAnalysis {
  int layer = 0, head = 0;
  std::vector<double> mass, mass_distinct, argmax_accuracy;  // [R]
  double entropy = 0, confidence = 0;
  double ablation_accuracy = 0, keep_only_accuracy = 0;
  std::vector<double> ablation_component, keep_only_component;  // [R]
  // With the head's output replaced by its mean over the evaluation set's tokens instead of 0.
  double mean_ablation_accuracy = 0;
  std::vector<double> mean_ablation_component;  // [R]
  double importance = 0;                        // L2-normalised within the layer
  double importance_raw = 0;                    // mean |dL/dg|
};

struct AttentionExamples {
  int64_t examples = 0, layers = 0, heads = 0, seq_len = 0;
  std::vector<float> weights;                               // [E, L, H, T, T]
  std::vector<std::vector<std::string>> tokens;             // [E][T]
  std::vector<std::vector<std::vector<int32_t>>> partners;  // [E][R][T], -1 for none
  std::vector<std::vector<int32_t>> labels, predicted;      // [E][T]; labels -100 at BOS
};

struct AnalysisResult {
  std::string task;  // Task::name()
  std::vector<std::string> relations;
  int layers = 0, heads = 0;
  std::vector<HeadAnalysis> per_head;  // layer-major: index l * heads + h
  HeadMetrics metrics;
  Specialization specialization;
  LabelAccuracy eval;  // the ungated model
  double eval_loss = 0;
  std::vector<std::vector<HeadRef>> groups;      // [R]
  std::vector<LabelAccuracy> group_ablated;      // [R]
  std::vector<std::vector<double>> group_drops;  // [R][R]: row = group off, col = component
  int64_t batches = 0, batch_size = 0, seed = 0;
  int64_t set_sentences = 0;  // the task's evaluation set, read in order; 0: the seeded stream
  int64_t step = -1;          // AnalysisOptions::step
  AttentionExamples examples;
  std::vector<PruningStep> pruning;                                    // heads_pruned 0 .. L*H - 1
  PruningImportance pruning_importance = PruningImportance::gradient;  // train.pruning_importance
  PathMass paths;                            // two-step paths (layers >= 2)
  std::vector<HeadComposition> composition;  // heads of layers >= 1
  PatchingMap patching;                      // activation patching (activation_patching.h)
  ChanceBaselines baselines;                 // over the same counted queries as `metrics`
  AccuracySpread eval_spread;                // per-batch accuracy of the ungated model
  std::vector<BestHead> best_heads;          // [R]
  // For a next-token task (Task::next_token): the detectors, the in-context score and
  // K-composition (induction.h), heads.json's "induction".
  std::optional<InductionMeasure> induction;

  const HeadAnalysis& at(int l, int h) const {
    return per_head[static_cast<size_t>(l) * heads + h];
  }
};

// Runs the analysis above. Throws headlab::Error if the task has no relations, the model's
// heads or layers disagree with the config, or options are out of range.
AnalysisResult analyze(Encoder& model, const Task& task, const Config& config,
                       const AnalysisOptions& options = {});

// The heads.json document.
nlohmann::json analysis_to_json(const AnalysisResult& result);
// The attention_tokens.json document.
nlohmann::json examples_to_json(const AnalysisResult& result);

// Writes heads.json, attention.npy and attention_tokens.json into `dir` (a run directory, or
// an analysis directory such as RUN/analysis/step-000500; it must exist). Throws
// headlab::Error on an I/O failure, naming the file.
//
// The three files are one set: each is written atomically, heads.json last, and
//   attention_tokens.json  "analysis": {"id": "<16 hex>", "step": N}
//   heads.json             "analysis": {"id", "step", "files": {"attention.npy": npy_digest,
//                                       "attention_tokens.json": XXH3-64 of the file}}
// where the id is XXH3-64 of the set's contents (so the same analysis gives the same id). A kill
// or a failed write between the renames leaves files of two analyses, which the report refuses
// (load_run_files, train/report/report.h) and `headlab analyze` rewrites as one set.
void write_analysis(const std::filesystem::path& dir, const AnalysisResult& result);

}  // namespace headlab
