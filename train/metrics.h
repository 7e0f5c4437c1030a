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
// steps, train_seconds, wall_seconds, steps_per_second, steps_to_95 (null if never), heads,
// seed, final_loss, parameters, config_hash, the model and runtime settings, and "versions"
// (library_versions()).

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "train/trainer.h"

namespace headlab {

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
