#pragma once
// Run and sweep directories: headlab's own, with one writer at a time.
//
// A directory headlab writes into is one it created, or an empty one it adopted, and it marks it
// as its own with `.headlab` (JSON: {"headlab": "run" | "sweep", "id": "<16 hex>", "created":
// "<UTC time>", "version": "..."}). A writer holds an exclusive flock on `.headlab.lock` (which
// also holds its pid, for the message a second writer gets) for as long as it writes. A
// directory copied whole (`cp -a`) is still a valid run: both files are copied and the lock is
// not. Everything else in a run directory is one of run_dir_files() (or a .tmp of one),
// checkpoints/ (train/run/checkpoint.h) or analysis/; in a sweep directory sweep_dir_files() and
// the sweep's run directories. Anything else is foreign: headlab never writes, replaces or
// deletes it, and refuses a non-empty directory that lacks the marker.
//
// The CLI claims a directory once, before anything is written, and keeps the claim until it
// exits (with several processes of one job, only the one that writes claims it):
//
//   RunDirClaim claim = claim_run_dir(out, RunDirUse::create);   // or resume / overwrite
//   Trainer trainer(config, out);  ...
//
// Readers (eval, the sweep's collection) take no lock: they check the marker
// (read_run_marker) and read checkpoints through load_checkpoint, which never fails because a
// writer runs. A reader beside `train --overwrite` reads through read_run_stably: it sees one
// run, or says the run is being replaced.
//
// --overwrite replaces a run in three steps, each visible to readers in the marker: the old
// marker gets "replacing": true (nothing is removed before), the old run's files are removed, and
// a fresh marker with a new id and "replaces": <old id> is written; both markers carry the pid
// of the process that wrote them.

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace headlab {

enum class DirKind { run, sweep };

// What a command does with the directory.
enum class RunDirUse {
  create,     // a new run or sweep: the directory is missing, empty, or ours and empty
  write,      // an existing one of ours, written (train --resume, analyze, sweep --resume)
  overwrite,  // ours replaced by a new one (train --overwrite), or created when missing
};

// What claim_run_dir would do, decided without changing anything (train --dry-run).
enum class RunDirPlan { create, adopt_empty, write, overwrite };

// The top-level files a run writes (each may also exist as "<name>.tmp" while it is written).
// A new file of a run must be added here, or --overwrite refuses to remove it.
const std::vector<std::string>& run_dir_files();
// The files of a sweep directory.
const std::vector<std::string>& sweep_dir_files();

// The marker's id of the headlab directory `dir` of `kind`. Throws headlab::Error when `dir`
// is not a directory, has no marker ("'x' is not a run directory of headlab (no .headlab)"), or
// the marker is not a regular file, too large, not JSON or of the other kind.
std::string read_run_marker(const std::filesystem::path& dir, DirKind kind = DirKind::run);
// Whether `dir` is a directory with a marker of `kind` (nothing is checked beyond that).
bool has_run_marker(const std::filesystem::path& dir, DirKind kind = DirKind::run);
// Whether `dir` is a directory without a marker that holds nothing but headlab's lock file or a
// marker being written: what a headlab process stopped between creating the directory and
// claiming it leaves (or an empty directory). Nothing there can be lost by claiming it.
bool left_unclaimed(const std::filesystem::path& dir);

// The marker of run directory `dir` as a reader needs it. Throws as read_run_marker.
struct RunMarkerState {
  std::string id;
  std::string replaces;       // the id of the run a `train --overwrite` replaced, "" for a new run
  int64_t pid = 0;            // the process that wrote the marker (0: an older headlab's marker)
  bool replacing = false;     // a `train --overwrite` is removing the old run's files
  bool writer_alive = false;  // whether process `pid` still runs (checked when read)
  bool operator==(const RunMarkerState&) const = default;
};
RunMarkerState read_run_state(const std::filesystem::path& dir, DirKind kind = DirKind::run);

// Runs `read`, everything a reader takes from run directory `dir` (its marker, run.json, a
// checkpoint, the restore), so that all of it comes from one run: when the marker changed
// while it read (a `train --overwrite` replaced the run), it reads once more; when the run is
// being replaced (the old files being removed, or the new run of a live `--overwrite` with no
// checkpoint yet) or was replaced under both reads, it throws headlab::Error "'RUN' is being
// replaced by `headlab train --overwrite` (pid N): try again once the new run has saved a
// checkpoint"; an `--overwrite` that died while removing gives "'RUN' is half replaced ...".
// Any other error of `read` is rethrown as it was.
void read_run_stably(const std::filesystem::path& dir, const std::function<void()>& read);

// Decides whether `dir` may be used for `use`, changing nothing. Throws headlab::Error naming
// the directory and what to do: not a directory; not empty and not headlab's (naming one foreign
// entry); already holding a run or sweep (create: "pass --resume to continue it, --overwrite to
// replace it, or choose another --out"); not headlab's or of the other kind (write); a foreign
// entry in a run that would be overwritten; a run left half replaced by an interrupted
// --overwrite (write).
RunDirPlan check_run_dir(const std::filesystem::path& dir, RunDirUse use,
                         DirKind kind = DirKind::run);

// The claim of a directory: its lock, held until destruction.
class RunDirClaim {
 public:
  RunDirClaim() = default;
  RunDirClaim(std::filesystem::path dir, std::string id, int lock_fd);
  RunDirClaim(RunDirClaim&& other) noexcept;
  RunDirClaim& operator=(RunDirClaim&& other) noexcept;
  ~RunDirClaim();

  const std::filesystem::path& dir() const { return dir_; }
  const std::string& id() const { return id_; }  // the marker's id
  bool held() const { return fd_ >= 0; }

 private:
  friend RunDirClaim claim_run_dir(const std::filesystem::path&, RunDirUse, DirKind);
  std::filesystem::path dir_;
  std::string id_;
  int fd_ = -1;
};

// check_run_dir, then: creates the directory if needed, takes the lock (a second writer gets
// "'x' is in use by pid N (a headlab process writing it): wait for it or stop it"), checks
// again under the lock, and for create or overwrite removes the old run's files (overwrite
// only) and writes a fresh marker. Throws headlab::Error; on an error nothing foreign is
// touched.
RunDirClaim claim_run_dir(const std::filesystem::path& dir, RunDirUse use,
                          DirKind kind = DirKind::run);

}  // namespace headlab
