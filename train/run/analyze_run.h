#pragma once
// The analysis outputs of a run directory: what `headlab analyze` and the end of
// `headlab train` write.

#include <filesystem>

#include "train/analysis/analysis.h"

namespace headlab {

// analyze, then write_analysis and the run report (train/report/report.h): what `headlab
// analyze` and the end of `headlab train` do. The files go into out_dir when it is given
// (created if needed; e.g. RUN_DIR/analysis/step-000500 for an earlier checkpoint, so the final
// heads.json and report.html stay as they are), else into run_dir; the report reads the
// trainer's files (metrics.jsonl, timeline.jsonl, ...) from run_dir either way. Throws as those
// do.
AnalysisResult analyze_run(const std::filesystem::path& run_dir, Encoder& model, const Task& task,
                           const Config& config, const AnalysisOptions& options = {},
                           const std::filesystem::path& out_dir = {});

}  // namespace headlab
