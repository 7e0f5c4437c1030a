#pragma once
// The run directory: what may receive a run, and what a run leaves there (the file list is in
// train/run/trainer.h).

#include <filesystem>

namespace headlab {

// Checks that `run_dir` may receive a run: for a new run it must not already hold one
// (config.resolved.toml, metrics.jsonl, summary.json or checkpoints/); for a resume it must
// hold a checkpoint. Throws headlab::Error naming the directory and what to do.
void check_run_dir(const std::filesystem::path& run_dir, bool resume);

}  // namespace headlab
