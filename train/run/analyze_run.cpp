#include "train/run/analyze_run.h"

#include "train/io/files.h"
#include "train/report/report.h"

namespace headlab {

AnalysisResult analyze_run(const std::filesystem::path& run_dir, Encoder& model, const Task& task,
                           const Config& config, const AnalysisOptions& options,
                           const std::filesystem::path& out_dir) {
  AnalysisResult result = analyze(model, task, config, options);
  if (!out_dir.empty()) make_directories(out_dir);
  write_analysis(out_dir.empty() ? run_dir : out_dir, result);
  write_run_report(run_dir, out_dir);
  return result;
}

}  // namespace headlab
