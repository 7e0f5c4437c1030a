#include "train/run/run_checkpoint.h"

#include "core/error.h"
#include "train/run/checkpoint.h"
#include "train/run/run_dir.h"

namespace headlab {

namespace fs = std::filesystem;

RunCheckpoint resolve_run_checkpoint(const std::string& run_dir, const std::string& checkpoint) {
  RunCheckpoint out{fs::path(run_dir), checkpoint};
  // `eval RUN/checkpoints/step-000100`: a checkpoint directory given for the run.
  const fs::path given = fs::path(run_dir).lexically_normal();
  const fs::path name =
      given.filename().empty() ? given.parent_path().filename() : given.filename();
  const fs::path parent =
      given.filename().empty() ? given.parent_path().parent_path() : given.parent_path();
  if (checkpoint.empty() && parent.filename() == "checkpoints" &&
      parse_checkpoint_name(name.string()) >= 0 && !has_run_marker(given)) {
    out.run_dir = parent.parent_path().empty() ? fs::path(".") : parent.parent_path();
    out.checkpoint = given.string();
  }
  read_run_marker(out.run_dir);  // a directory of headlab's, or a clear error
  return out;
}

CheckpointData load_run_checkpoint(const RunCheckpoint& rc) {
  if (rc.checkpoint.empty() || rc.checkpoint == "latest") {
    if (!latest_checkpoint(rc.run_dir))
      fail(
          "no checkpoint in '{}' ('{}' does not exist): the run stopped before its first "
          "checkpoint",
          rc.run_dir.string(), (rc.run_dir / "checkpoints" / "latest").string());
    return load_checkpoint(rc.run_dir);  // retries when retention removes it meanwhile
  }
  return load_checkpoint_dir(find_checkpoint(rc.run_dir, rc.checkpoint));
}

}  // namespace headlab
