#include "train/run/analyze_run.h"

#include "layers/encoder.h"
#include "train/io/files.h"
#include "train/report/report.h"
#include "train/run/evaluate.h"

namespace headlab {

AnalysisResult analyze_run(const std::filesystem::path& run_dir, Encoder& model, const Task& task,
                           const Config& config, const AnalysisOptions& options,
                           const std::filesystem::path& out_dir) {
  AnalysisResult result = analyze(model, task, config, options);
  // An exploded checkpoint is refused before its analysis is written (exit 3, as for training).
  EvalMetrics e;
  e.loss = result.eval_loss;
  e.accuracy = result.eval.accuracy;
  e.relation_accuracy = result.eval.component;
  check_finite(e, model, "the analyzed checkpoint");
  if (!out_dir.empty()) make_directories(out_dir);
  write_analysis(out_dir.empty() ? run_dir : out_dir, result);
  write_run_report(run_dir, out_dir);
  return result;
}

}  // namespace headlab
