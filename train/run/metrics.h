#pragma once
// The run's metric files.
//
// metrics.jsonl: one JSON object per line.
//   training row: {"step", "loss", "accuracy", "lr", "grad_norm", "tokens_per_second",
//                  "elapsed_seconds"}
//   evaluation row: {"step", "eval": true, "loss", "accuracy", "component_accuracy":
//                  {"PREV": .., ...}, "tokens", "elapsed_seconds"}
// Numbers are written with 17 significant digits, so a float loss reads back exactly.
//
// summary.json (written once at the end): eval_accuracy, eval_loss, eval_component_accuracy,
// steps, train_seconds, wall_seconds, eval_seconds, steps_per_second, steps_to_95 (null if
// never), heads, seed, final_loss, parameters, config_hash, the model and runtime settings,
// "versions" (library_versions()), and "run_json" / "train_log": the run's provenance and log
// files.

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "train/config/config.h"

namespace headlab {

struct StepMetrics {
  int64_t step = 0;  // updates done, 1..train.steps
  int64_t total_steps = 0;
  double loss = 0;               // of this step's batch, before the update
  double accuracy = 0;           // token accuracy on this step's batch (non-BOS)
  double lr = 0;                 // used for this update
  double grad_norm = 0;          // before clipping
  double tokens_per_second = 0;  // over the steps since the previous metrics row
  double elapsed_seconds = 0;    // wall time since the run began (across resumes)
};

struct EvalMetrics {
  int64_t step = 0;
  double loss = 0;                        // mean cross-entropy over non-BOS tokens
  double accuracy = 0;                    // token accuracy over non-BOS tokens
  std::vector<std::string> relations;     // Task::relations()
  std::vector<double> relation_accuracy;  // per relation: Task::relation_correct's accuracy,
                                          // written as "component_accuracy"
  int64_t tokens = 0;                     // non-BOS tokens evaluated
  int64_t sentences = 0;                  // sentences evaluated
  bool from_set = false;                  // the task's evaluation set in order (EvalStream)
  double elapsed_seconds = 0;
};

// What run() returns; also the content of summary.json.
struct TrainResult {
  EvalMetrics final_eval;
  int64_t steps = 0;
  int64_t start_step = 0;    // > 0 when resumed
  double final_loss = 0;     // last training step's loss
  double train_seconds = 0;  // time in training steps (all sessions of the run)
  double wall_seconds = 0;   // everything: steps, evaluations, checkpoints, files
  double eval_seconds = 0;   // in the periodic evaluations of this session (timeline included)
  double steps_per_second = 0;
  int64_t steps_to_95 = -1;  // first eval step with accuracy >= 0.95, -1 if none
  bool interrupted = false;  // stopped early by TrainObserver::should_stop()
  int64_t ranks = 1;         // processes of the data-parallel job
  std::filesystem::path run_dir;
};

nlohmann::json step_to_json(const StepMetrics& m);
nlohmann::json eval_to_json(const EvalMetrics& m);

class MetricsWriter {
 public:
  // Opens `path`. keep_through < 0: a new file (replacing any). keep_through >= 0 (resume):
  // rows with step <= keep_through are kept (rows a crashed session wrote after its last
  // checkpoint are dropped, the file rewritten atomically) and new rows are appended.
  // Throws headlab::Error naming the path on an I/O failure.
  MetricsWriter(std::filesystem::path path, int64_t keep_through);

  void write_step(const StepMetrics& m) { write(step_to_json(m)); }
  void write_eval(const EvalMetrics& m);
  // (step, accuracy) of every evaluation row, kept ones and new ones, in order.
  const std::vector<std::pair<int64_t, double>>& evals() const { return evals_; }

 private:
  void write(const nlohmann::json& row);

  std::filesystem::path path_;
  std::ofstream out_;
  std::vector<std::pair<int64_t, double>> evals_;
};

// The first step whose accuracy >= threshold, or -1.
int64_t first_step_reaching(const std::vector<std::pair<int64_t, double>>& evals, double threshold);

nlohmann::json summary_to_json(const TrainResult& result, const Config& config, int64_t parameters);
// Writes run_dir/summary.json atomically.
void write_summary(const std::filesystem::path& run_dir, const nlohmann::json& summary);

}  // namespace headlab
