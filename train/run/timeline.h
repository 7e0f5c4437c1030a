#pragma once
// timeline.jsonl: specialization over training. At every evaluation (train.eval_every, and the
// last step) the trainer also measures, on the same evaluation sentences and without ablations,
// each head's attention mass on each relation's gold partner (train/analysis/head_metrics.h)
// and the specialization summary over it, and appends one row:
//
//   {"step": 250,                                   updates done
//    "accuracy": 0.97, "loss": 0.11,                eval accuracy and loss at that step
//    "component_accuracy": {"PREV": .., ...},       per relation (as metrics.jsonl's eval rows)
//    "s_match": 0.86, "s_max": 0.88, "n_claimed": 3,
//    "assignment": {"PREV": [layer, head], ..},     the heads behind s_match (null: none)
//    "mass": [[{"PREV": .., "HEAD": .., ..}, ..]]}  mass[layer][head][relation] = M[l, h, r]
//
// For a next-token task (Task::next_token) the row also has "induction" (the same evaluation
// sentences, train.timeline_batches of them): per layer and head the previous-token,
// duplicate-token and induction detectors, the strongest previous-token and induction heads with
// their scores, the in-context score and the K-composition matrix (train/analysis/induction.h).
//
// A relation counts as claimed at a step when its assigned head has mass > 0.5; the report
// (train/report/timeline_section.cpp) draws these rows. On --resume the rows after the
// checkpoint's step are dropped, as metrics.jsonl's are.

#include <cstdint>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "train/analysis/head_metrics.h"
#include "train/run/metrics.h"

namespace headlab {

// One row from an evaluation and the head metrics of the same sentences.
nlohmann::json timeline_row(const EvalMetrics& eval, const HeadMetrics& heads,
                            double claim_threshold = 0.5);

class TimelineWriter {
 public:
  // Opens `path`: keep_through < 0 starts a new file; >= 0 keeps the rows with step <=
  // keep_through (a resumed run) and appends. Throws headlab::Error naming the path.
  TimelineWriter(std::filesystem::path path, int64_t keep_through);
  void write(const nlohmann::json& row);

 private:
  std::filesystem::path path_;
  std::ofstream out_;
};

}  // namespace headlab
