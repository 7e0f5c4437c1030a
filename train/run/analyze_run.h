#pragma once
// The analysis outputs of a run directory: what `headlab analyze` and the end of
// `headlab train` write.

#include <filesystem>

#include "train/analysis/analysis.h"

namespace headlab {

// analyze, then write_analysis and the run report (train/report/report.h) into run_dir: what
// `headlab analyze` and the end of `headlab train` do. Throws as those do.
AnalysisResult analyze_run(const std::filesystem::path& run_dir, Encoder& model, const Task& task,
                           const Config& config, const AnalysisOptions& options = {});

}  // namespace headlab
