#include "train/run/checkpoint_dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

#include <fmt/format.h>

#include "core/error.h"
#include "train/io/files.h"
#include "train/run/checkpoint.h"

namespace headlab::checkpoint_detail {
namespace {

bool all_digits(const std::string& s, size_t begin, size_t end) {
  if (begin >= end || end > s.size()) return false;
  for (size_t i = begin; i < end; ++i)
    if (s[i] < '0' || s[i] > '9') return false;
  return true;
}

// "<prefix>step-<digits>-<pid digits>[suffix]" -> the pid, or -1.
long leftover_pid(const std::string& name, const std::string& prefix, bool allow_b) {
  if (name.rfind(prefix + "step-", 0) != 0) return -1;
  const size_t dash = name.find('-', prefix.size() + 5);
  if (dash == std::string::npos || !all_digits(name, prefix.size() + 5, dash)) return -1;
  size_t end = name.size();
  if (allow_b && end > dash + 1 && name.back() == 'b') --end;
  if (!all_digits(name, dash + 1, end) || end - dash - 1 > 9) return -1;
  return std::stol(name.substr(dash + 1, end - dash - 1));
}

// Whether `pid` is another process that still runs (its temporary directory is not ours to
// remove, even though the run lock means it should not exist).
bool alive_other(long pid) {
  if (pid == static_cast<long>(::getpid())) return false;
  return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

bool is_dir_not_link(const fs::path& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace

std::vector<std::string> list_dir(const fs::path& dir) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  if (!d) fail("cannot list '{}': {}", dir.string(), std::strerror(errno));
  errno = 0;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  const int err = errno;
  ::closedir(d);
  if (err != 0) fail("cannot list '{}': {}", dir.string(), std::strerror(err));
  std::sort(names.begin(), names.end());
  return names;
}

std::optional<std::string> read_link(const fs::path& link) {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink(link.c_str(), buf, sizeof buf);
  if (n < 0 || n == static_cast<ssize_t>(sizeof buf)) return std::nullopt;
  return std::string(buf, static_cast<size_t>(n));
}

namespace {

bool is_checkpoint_file(const std::string& name) {
  return std::find_if(std::begin(kFiles), std::end(kFiles),
                      [&](const char* f) { return name == f; }) != std::end(kFiles);
}

// A directory (not a link) holding nothing but regular files with a checkpoint's file names:
// what a save writes into its temporary directory, and what a checkpoint moved away holds.
// Anything else in it (a user's file, a subdirectory, a link) proves it is not headlab's.
bool holds_only_checkpoint_files(const fs::path& dir) {
  if (!is_dir_not_link(dir)) return false;
  std::vector<std::string> names;
  try {
    names = list_dir(dir);
  } catch (const Error&) {
    return false;
  }
  for (const std::string& name : names) {
    struct stat st {};
    if (!is_checkpoint_file(name) || ::lstat((dir / name).c_str(), &st) != 0 ||
        !S_ISREG(st.st_mode))
      return false;
  }
  return true;
}

// Removes a leftover by the names a save writes, then the directory itself: never recursively,
// so a file that appeared in it meanwhile stays (and so does the directory).
void remove_leftover_dir(const fs::path& dir) {
  for (const char* f : kFiles)
    if (::unlink((dir / f).c_str()) != 0 && errno != ENOENT)
      fail("cannot remove '{}': {}", (dir / f).string(), std::strerror(errno));
  if (::rmdir(dir.c_str()) != 0 && errno != ENOENT && errno != ENOTEMPTY && errno != EEXIST)
    fail("cannot remove '{}': {}", dir.string(), std::strerror(errno));
}

}  // namespace

bool is_complete_checkpoint(const fs::path& dir) {
  if (parse_checkpoint_name(dir.filename().string()) < 0 || !holds_only_checkpoint_files(dir))
    return false;
  for (const char* file : kFiles)  // every one of them
    if (::access((dir / file).c_str(), F_OK) != 0) return false;
  return true;
}

bool is_own_leftover(const fs::path& root, const std::string& name) {
  if (name == "latest.tmp") return read_link(root / name).has_value();
  const long tmp = leftover_pid(name, ".tmp-", true), trash = leftover_pid(name, ".trash-", false);
  return (tmp >= 0 || trash >= 0) && holds_only_checkpoint_files(root / name);
}

void remove_leftovers(const fs::path& root, const std::optional<std::string>& latest) {
  for (const std::string& name : list_dir(root)) {
    if ((latest && name == *latest) || !is_own_leftover(root, name)) continue;
    const long pid =
        std::max(leftover_pid(name, ".tmp-", true), leftover_pid(name, ".trash-", false));
    if (pid >= 0 && alive_other(pid)) continue;
    if (name == "latest.tmp") {
      if (::unlink((root / name).c_str()) != 0 && errno != ENOENT)
        fail("cannot remove '{}': {}", (root / name).string(), std::strerror(errno));
    } else {
      remove_leftover_dir(root / name);
    }
  }
}

bool move_checkpoint_away(const fs::path& root, const std::string& name, const std::string& trash,
                          bool wait) {
  const fs::path dir = root / name;
  int fd;
  do fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  while (fd < 0 && errno == EINTR);
  if (fd < 0) fail("cannot open '{}': {}", dir.string(), std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  int rc;
  do rc = ::flock(fd, LOCK_EX | (wait ? 0 : LOCK_NB));
  while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    if (errno == EWOULDBLOCK) return false;
    fail("cannot lock '{}': {}", dir.string(), std::strerror(errno));
  }
  rename_path(dir, root / trash);
  return true;
}

void apply_retention(const fs::path& root, int64_t step, int64_t keep, const std::string& latest) {
  std::vector<std::pair<int64_t, std::string>> steps;
  auto remove = [&](const std::string& name) {
    // A reader holding it keeps it until a later save; otherwise move it away, then delete.
    const std::string trash = fmt::format(".trash-{}-{}", name, ::getpid());
    if (move_checkpoint_away(root, name, trash, false)) remove_leftover_dir(root / trash);
  };
  for (const std::string& name : list_dir(root)) {
    const int64_t s = parse_checkpoint_name(name);
    if (s < 0 || name == latest || !is_complete_checkpoint(root / name)) continue;
    if (s > step)
      remove(name);  // abandoned by a crash before `latest` moved
    else
      steps.emplace_back(s, name);
  }
  if (keep == 0) return;
  std::sort(steps.begin(), steps.end(), std::greater<>());
  // `latest` itself is one of the kept.
  for (size_t i = static_cast<size_t>(keep) - 1; i < steps.size(); ++i) remove(steps[i].second);
}

ReaderLock::ReaderLock(const fs::path& dir) {
  do fd_ = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  while (fd_ < 0 && errno == EINTR);
  if (fd_ < 0) {
    if (errno == ENOENT) {
      removed_ = true;
      return;
    }
    fail("checkpoint '{}' is not a directory: {}", dir.string(), std::strerror(errno));
  }
  int rc;
  do rc = ::flock(fd_, LOCK_SH);
  while (rc != 0 && errno == EINTR);
  if (rc != 0) fail("cannot lock '{}': {}", dir.string(), std::strerror(errno));
  // Retention renames a directory under its exclusive lock: if it did before we got ours, the
  // name no longer leads to the directory we hold.
  struct stat held {
  }, named{};
  if (::fstat(fd_, &held) != 0 || ::stat(dir.c_str(), &named) != 0 || held.st_ino != named.st_ino ||
      held.st_dev != named.st_dev)
    removed_ = true;
}

ReaderLock::~ReaderLock() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace headlab::checkpoint_detail

namespace headlab {

using namespace checkpoint_detail;

std::string foreign_checkpoint_entry(const fs::path& run_dir) {
  const fs::path root = run_dir / "checkpoints";
  struct stat st {};
  if (::lstat(root.c_str(), &st) != 0) return "";
  if (!S_ISDIR(st.st_mode)) return "checkpoints";
  for (const std::string& name : list_dir(root)) {
    if (name == "latest" && read_link(root / name)) continue;
    if (is_complete_checkpoint(root / name) || is_own_leftover(root, name)) continue;
    return "checkpoints/" + name;
  }
  return "";
}

fs::path find_checkpoint(const fs::path& run_dir, const std::string& choice) {
  const fs::path root = run_dir / "checkpoints";
  if (choice.empty() || choice == "latest") {
    const std::optional<fs::path> latest = latest_checkpoint(run_dir);
    if (!latest)
      fail("no checkpoint in '{}': '{}' does not exist", run_dir.string(),
           (root / "latest").string());
    return *latest;
  }
  const int64_t step = parse_checkpoint_name(choice);
  fs::path dir;
  if (step >= 0 && choice.find('/') == std::string::npos) {
    dir = root / checkpoint_dir_name(step);
  } else {
    std::error_code ec;
    dir = fs::weakly_canonical(fs::path(choice), ec);
    const fs::path canonical_root = fs::weakly_canonical(root, ec);
    if (ec || dir.parent_path() != canonical_root)
      fail(
          "--checkpoint {}: not a checkpoint of '{}' (expected step-NNNNNN or a directory in '{}')",
          choice, run_dir.string(), root.string());
    dir = root / dir.filename();
  }
  if (!is_complete_checkpoint(dir)) {
    std::string known;
    if (fs::is_directory(root))
      for (const std::string& name : list_dir(root))
        if (is_complete_checkpoint(root / name)) known += (known.empty() ? "" : ", ") + name;
    fail("--checkpoint {}: '{}' is not a complete checkpoint (the run has: {})", choice,
         dir.string(), known.empty() ? "none" : known);
  }
  return dir;
}

}  // namespace headlab
