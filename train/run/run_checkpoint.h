#pragma once
// The run and checkpoint that `headlab eval`, `headlab analyze` and a model loaded from Python
// (headlab.load_model) read: a run directory, or one of its checkpoint directories given in its
// place, and a checkpoint of it ("" or "latest": the latest; step-NNNNNN or a path to one of the
// run's checkpoint directories).

#include <filesystem>
#include <string>

namespace headlab {

struct CheckpointData;

struct RunCheckpoint {
  std::filesystem::path run_dir;
  std::string checkpoint;  // "": the latest
};

// Checks that the run directory is headlab's (RUN_DIR may itself be one of the run's checkpoint
// directories, when `checkpoint` is ""). Throws headlab::Error.
RunCheckpoint resolve_run_checkpoint(const std::string& run_dir, const std::string& checkpoint);
// Loads and verifies the chosen checkpoint (the latest is re-read if retention removes it).
// Throws headlab::Error naming the run when it has no checkpoint yet.
CheckpointData load_run_checkpoint(const RunCheckpoint& rc);

}  // namespace headlab
