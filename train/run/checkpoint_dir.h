#pragma once
// Inside checkpoints/ (internal to train/run/checkpoint*.cpp): which names are headlab's, the
// cleanup of its own leftovers, retention, and the directory locks between readers and
// retention (see checkpoint.h for the rules).

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace headlab::checkpoint_detail {

namespace fs = std::filesystem;

// The four files of a checkpoint directory.
inline constexpr const char* kFiles[] = {"state.json", "model.safetensors", "optimizer.safetensors",
                                         "config.resolved.toml"};

// The entry names of `dir` (without "." and ".."). Throws naming the directory.
std::vector<std::string> list_dir(const fs::path& dir);
// The target of the symbolic link `link`, or nullopt if it does not exist or is no link.
std::optional<std::string> read_link(const fs::path& link);

// A directory (not a link) named step-<digits> that holds exactly kFiles, as regular files.
bool is_complete_checkpoint(const fs::path& dir);
// ".tmp-step-N-<pid>[b]" and ".trash-step-N-<pid>" directories holding nothing but regular files
// named as kFiles, and "latest.tmp" (a link): what a save of headlab leaves when it is killed. A
// directory of that name holding anything else is not headlab's (a user's), and is left alone.
bool is_own_leftover(const fs::path& root, const std::string& name);

// Removes the leftovers of saves of processes that are gone, never `latest`'s target: by the
// file names a save writes, then the empty directory (never recursively).
void remove_leftovers(const fs::path& root, const std::optional<std::string>& latest);
// Retention after saving `step` (see checkpoint.h); `latest` is never removed.
void apply_retention(const fs::path& root, int64_t step, int64_t keep, const std::string& latest);
// Moves checkpoint `name` to `trash` (a name in root) under the directory's exclusive lock;
// with wait = false returns false, moving nothing, while a reader holds it.
bool move_checkpoint_away(const fs::path& root, const std::string& name, const std::string& trash,
                          bool wait);

// A shared lock on a checkpoint directory for as long as it lives (flock on the directory).
class ReaderLock {
 public:
  // Opens and locks `dir` (waiting while retention holds it). removed() tells whether the
  // directory was moved away before the lock was granted.
  explicit ReaderLock(const fs::path& dir);
  ~ReaderLock();
  ReaderLock(const ReaderLock&) = delete;
  ReaderLock& operator=(const ReaderLock&) = delete;
  bool removed() const { return removed_; }

 private:
  int fd_ = -1;
  bool removed_ = false;
};

}  // namespace headlab::checkpoint_detail
