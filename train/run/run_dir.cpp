#include "train/run/run_dir.h"

#include "core/error.h"
#include "train/run/checkpoint.h"

namespace headlab {

void check_run_dir(const std::filesystem::path& run_dir, bool resume) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(run_dir, ec) && !fs::is_directory(run_dir, ec))
    fail("'{}' exists and is not a directory", run_dir.string());
  if (resume) {
    if (!latest_checkpoint(run_dir))
      fail("--resume: no checkpoint in '{}' ('{}' does not exist); start without --resume",
           run_dir.string(), (run_dir / "checkpoints" / "latest").string());
    return;
  }
  for (const char* name : {"config.resolved.toml", "metrics.jsonl", "summary.json", "checkpoints"})
    if (fs::exists(run_dir / name, ec))
      fail(
          "'{}' already holds a run ('{}' exists): pass --resume to continue it, or choose "
          "another directory with --out",
          run_dir.string(), name);
}

}  // namespace headlab
