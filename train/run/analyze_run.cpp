#include "train/run/analyze_run.h"

#include "train/report/report.h"

namespace headlab {

AnalysisResult analyze_run(const std::filesystem::path& run_dir, Encoder& model, const Task& task,
                           const Config& config, const AnalysisOptions& options) {
  AnalysisResult result = analyze(model, task, config, options);
  write_analysis(run_dir, result);
  write_run_report(run_dir);
  return result;
}

}  // namespace headlab
