#include "train/run/run_dir.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/version.h"
#include "train/io/files.h"
#include "train/io/json.h"
#include "train/run/checkpoint.h"
#include "train/run/run_json.h"

namespace headlab {
namespace {

namespace fs = std::filesystem;

constexpr const char* kMarker = ".headlab";
constexpr const char* kLock = ".headlab.lock";
constexpr uint64_t kMaxMarkerBytes = 64 << 10;

const char* kind_name(DirKind kind) {
  return kind == DirKind::run ? "run" : "sweep";
}

std::vector<std::string> entries(const fs::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    names.push_back(it->path().filename().string());
  if (ec) fail("cannot list '{}': {}", dir.string(), ec.message());
  std::sort(names.begin(), names.end());
  return names;
}

bool is_regular(const fs::path& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// A regular file named one of `files` (or one of them + ".tmp").
bool is_own_file(const fs::path& dir, const std::string& name,
                 const std::vector<std::string>& files) {
  const std::string base = name.ends_with(".tmp") ? name.substr(0, name.size() - 4) : name;
  return std::find(files.begin(), files.end(), base) != files.end() && is_regular(dir / name);
}

// analysis/step-NNNNNN/ directories holding a run's analysis files (headlab analyze
// --checkpoint of an earlier step).
bool is_own_analysis(const fs::path& dir) {
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return false;
  for (const std::string& step : entries(dir)) {
    if (parse_checkpoint_name(step) < 0 || ::lstat((dir / step).c_str(), &st) != 0 ||
        !S_ISDIR(st.st_mode))
      return false;
    for (const std::string& name : entries(dir / step))
      if (!is_own_file(dir / step, name, run_dir_files())) return false;
  }
  return true;
}

// The first entry of the headlab directory `dir` that headlab did not write, or "".
std::string foreign_entry(const fs::path& dir, DirKind kind) {
  for (const std::string& name : entries(dir)) {
    if (name == kMarker || name == kLock || name == std::string(kMarker) + ".tmp") continue;
    if (kind == DirKind::run) {
      if (is_own_file(dir, name, run_dir_files())) continue;
      if (name == "checkpoints") {
        const std::string foreign = foreign_checkpoint_entry(dir);
        if (foreign.empty()) continue;
        return foreign;
      }
      if (name == "analysis" && is_own_analysis(dir / name)) continue;
    } else {
      if (is_own_file(dir, name, sweep_dir_files())) continue;
      if (fs::is_directory(fs::symlink_status(dir / name)) && has_run_marker(dir / name))
        continue;  // one of the sweep's runs
    }
    return name;
  }
  return "";
}

// The entries of `dir` other than the lock file and a marker being written (another process
// claiming the directory at this moment; the lock then decides).
std::vector<std::string> contents(const fs::path& dir) {
  std::vector<std::string> names = entries(dir);
  std::erase(names, std::string(kLock));
  std::erase(names, std::string(kMarker) + ".tmp");
  return names;
}

enum class Marker { none, run, sweep };

Marker marker_of(const fs::path& dir) {
  struct stat st {};
  const fs::path path = dir / kMarker;
  if (::lstat(path.c_str(), &st) != 0 && errno == ENOENT) return Marker::none;
  const nlohmann::json m = read_json_file(path, kMaxMarkerBytes);
  const auto it = m.find("headlab");
  if (it != m.end() && *it == "run") return Marker::run;
  if (it != m.end() && *it == "sweep") return Marker::sweep;
  fail("'{}' is not a marker of headlab (expected \"headlab\": \"run\" or \"sweep\")",
       path.string());
}

Marker marker_for(DirKind kind) {
  return kind == DirKind::run ? Marker::run : Marker::sweep;
}

RunDirPlan check_create(const fs::path& dir, DirKind kind, Marker marker) {
  const std::vector<std::string> names = contents(dir);
  if (marker == Marker::none) {
    if (names.empty()) return RunDirPlan::adopt_empty;
    // A marker that appeared between the two looks: another process is claiming the directory
    // right now (two runs started together); judge by its marker, as a later look would.
    if (std::find(names.begin(), names.end(), kMarker) != names.end())
      if (const Marker now = marker_of(dir); now != Marker::none)
        return check_create(dir, kind, now);
    fail("'{}' is not empty and was not created by headlab (it holds '{}'): choose another --out",
         dir.string(), names[0]);
  }
  if (marker != marker_for(kind))
    fail("'{}' is a {} directory of headlab, not a {} directory", dir.string(),
         marker == Marker::run ? "run" : "sweep", kind_name(kind));
  if (names.size() == 1) return RunDirPlan::adopt_empty;  // only the marker
  const std::string shown = names[0] == kMarker ? names[1] : names[0];
  if (kind == DirKind::sweep)
    fail(
        "'{}' already holds a sweep ('{}' exists): pass --resume to continue or extend it, or "
        "choose another --out",
        dir.string(), shown);
  fail(
      "'{}' already holds a run ('{}' exists): pass --resume to continue it, --overwrite to "
      "replace it, or choose another --out",
      dir.string(), shown);
}

std::string new_id() {
  std::random_device device;
  const uint64_t a = device(), b = device();
  return fmt::format("{:016x}", a << 32 ^ b ^ static_cast<uint64_t>(::getpid()) << 20);
}

// `extra` adds keys: "pid" (the process that wrote it), "replaces" (the id of the run a
// `--overwrite` replaced), "replacing" (while `--overwrite` removes the old run's files).
void write_marker(const fs::path& dir, DirKind kind, const std::string& id,
                  const nlohmann::json& extra = nlohmann::json::object()) {
  nlohmann::json m = {{"headlab", kind_name(kind)},
                      {"id", id},
                      {"created", utc_now()},
                      {"version", HEADLAB_VERSION},
                      {"pid", static_cast<int64_t>(::getpid())}};
  m.update(extra);
  write_file_atomic(dir / kMarker, m.dump(2) + "\n");
}

bool process_alive(int64_t pid) {
  return pid > 0 && pid <= INT32_MAX && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM);
}

std::string being_replaced(const fs::path& dir, const RunMarkerState& s) {
  return fmt::format(
      "'{}' is being replaced by `headlab train --overwrite` (pid {}): try again once the new "
      "run has saved a checkpoint",
      dir.string(), s.pid);
}

std::string half_replaced(const fs::path& dir, const RunMarkerState& s) {
  return fmt::format(
      "'{}' is half replaced: `headlab train --overwrite` (pid {}) stopped while it removed the "
      "old run; run it again to replace the run, or choose another --out",
      dir.string(), s.pid);
}

// The pid a lock file holds, for messages (its holder writes it just after locking: a few
// tries for one that locked a moment ago).
std::string holder_of(const fs::path& lock) {
  for (int attempt = 0; attempt < 20; ++attempt) {
    try {
      std::string text = read_file(lock, 64);
      while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
      if (!text.empty() && text.find_first_not_of("0123456789") == std::string::npos)
        return "pid " + text;
    } catch (const Error&) {
    }
    ::usleep(1000);
  }
  return "another process";
}

// Fails with the "in use" line when a live process holds the lock of `dir`. Checked before a
// directory's contents are judged: a live writer's half-written checkpoint is not a foreign
// file. Opens the lock file only if it exists, read-only, and releases at once; a lock this
// process holds is not "in use".
void refuse_if_in_use(const fs::path& dir) {
  const fs::path path = dir / kLock;
  int fd;
  do fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  while (fd < 0 && errno == EINTR);
  if (fd < 0) return;  // no lock file (or not one headlab can use): lock_dir() says why
  struct stat st {};
  bool busy = false;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    int rc;
    do rc = ::flock(fd, LOCK_EX | LOCK_NB);
    while (rc != 0 && errno == EINTR);
    busy = rc != 0 && errno == EWOULDBLOCK;
  }
  ::close(fd);  // releases the lock if it was taken
  // This process may hold it itself (a check after its own claim).
  if (busy && holder_of(path) != fmt::format("pid {}", ::getpid()))
    fail("'{}' is in use by {} (a headlab process writing it): wait for it to finish or stop it",
         dir.string(), holder_of(path));
}

// Opens and locks the lock file of `dir`; returns the descriptor.
int lock_dir(const fs::path& dir) {
  const fs::path path = dir / kLock;
  int fd;
  do fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
  while (fd < 0 && errno == EINTR);
  if (fd < 0)
    fail("cannot create '{}': {}", path.string(),
         errno == ELOOP ? "it is a symbolic link" : std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail("cannot lock '{}': it is not a regular file", path.string());
  }
  int rc;
  do rc = ::flock(fd, LOCK_EX | LOCK_NB);
  while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    const int err = errno;
    ::close(fd);
    if (err == EWOULDBLOCK)
      fail("'{}' is in use by {} (a headlab process writing it): wait for it to finish or stop it",
           dir.string(), holder_of(path));
    fail("cannot lock '{}': {}", path.string(), std::strerror(err));
  }
  const std::string pid = fmt::format("{}\n", ::getpid());
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) < 0) {
    const int err = errno;
    ::close(fd);
    fail("cannot write '{}': {}", path.string(), std::strerror(err));
  }
  return fd;
}

}  // namespace

const std::vector<std::string>& run_dir_files() {
  static const std::vector<std::string> files = {"config.resolved.toml",
                                                 "metrics.jsonl",
                                                 "summary.json",
                                                 "train.log",
                                                 "run.json",
                                                 "heads.json",
                                                 "attention.npy",
                                                 "attention_tokens.json",
                                                 "report.html",
                                                 "timeline.jsonl"};
  return files;
}

const std::vector<std::string>& sweep_dir_files() {
  static const std::vector<std::string> files = {"sweep.json", "sweep.csv", "report.html",
                                                 "sweep.log"};
  return files;
}

bool has_run_marker(const fs::path& dir, DirKind kind) {
  try {
    return marker_of(dir) == marker_for(kind);
  } catch (const Error&) {
    return false;
  }
}

RunMarkerState read_run_state(const fs::path& dir, DirKind kind) {
  RunMarkerState s;
  s.id = read_run_marker(dir, kind);
  const nlohmann::json m = read_json_file(dir / kMarker, kMaxMarkerBytes);
  const auto pid = m.find("pid");
  if (pid != m.end() && pid->is_number_integer()) s.pid = pid->get<int64_t>();
  const auto replaces = m.find("replaces");
  if (replaces != m.end() && replaces->is_string()) s.replaces = replaces->get<std::string>();
  const auto replacing = m.find("replacing");
  s.replacing = replacing != m.end() && replacing->is_boolean() && replacing->get<bool>();
  s.writer_alive = process_alive(s.pid);
  return s;
}

void read_run_stably(const fs::path& dir, const std::function<void()>& read) {
  // A `train --overwrite` marks the run as being replaced before it removes anything and gives
  // the new run a new id, so a read that began and ended with the same marker saw one run.
  for (int attempt = 0; attempt < 2; ++attempt) {
    const RunMarkerState before = read_run_state(dir);
    if (before.replacing)
      fail("{}", before.writer_alive ? being_replaced(dir, before) : half_replaced(dir, before));
    try {
      read();
    } catch (const std::exception&) {
      if (read_run_state(dir) == before) {
        // The new run of a live `--overwrite`: before its first checkpoint it is still being
        // replaced; a checkpoint that appeared since the read failed is read once more.
        if (before.writer_alive && !before.replaces.empty()) {
          if (!latest_checkpoint(dir)) fail("{}", being_replaced(dir, before));
          if (attempt == 0) continue;
        }
        throw;
      }
      continue;  // replaced while it was read: once more, with the new run
    }
    if (read_run_state(dir) == before) return;
  }
  fail("{}", being_replaced(dir, read_run_state(dir)));
}

std::string read_run_marker(const fs::path& dir, DirKind kind) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    fail("'{}' is not a directory", dir.string());
  const Marker marker = marker_of(dir);
  if (marker == Marker::none)
    fail("'{}' is not a {} directory of headlab (it has no {})", dir.string(), kind_name(kind),
         kMarker);
  if (marker != marker_for(kind))
    fail("'{}' is a {} directory of headlab, not a {} directory", dir.string(),
         marker == Marker::run ? "run" : "sweep", kind_name(kind));
  const nlohmann::json m = read_json_file(dir / kMarker, kMaxMarkerBytes);
  const auto id = m.find("id");
  return id != m.end() && id->is_string() ? id->get<std::string>() : "";
}

// The files a writer will replace or append to must be regular files: anything else there
// (a FIFO, a link, a directory) was not written by headlab and is refused before any work.
void check_own_files(const fs::path& dir, DirKind kind) {
  for (const std::string& name : kind == DirKind::run ? run_dir_files() : sweep_dir_files())
    for (const fs::path& path : {dir / name, dir / (name + ".tmp")}) {
      struct stat st {};
      if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
        fail("'{}' is {}, not a file headlab wrote: headlab writes there; move it away",
             path.string(), file_kind(st.st_mode));
    }
  struct stat st {};
  const fs::path lock = dir / kLock;
  if (::lstat(lock.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    fail("'{}' is {}, not the lock file headlab wrote", lock.string(), file_kind(st.st_mode));
}

bool left_unclaimed(const fs::path& dir) {
  struct stat st {};
  return ::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && contents(dir).empty();
}

RunDirPlan check_run_dir(const fs::path& dir, RunDirUse use, DirKind kind) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    if (errno != ENOENT && errno != ENOTDIR)
      fail("cannot use '{}': {}", dir.string(), std::strerror(errno));
    if (use == RunDirUse::write)
      fail("'{}' does not exist: there is no {} to continue", dir.string(), kind_name(kind));
    return RunDirPlan::create;
  }
  if (!S_ISDIR(st.st_mode)) fail("'{}' exists and is not a directory", dir.string());
  const Marker marker = marker_of(dir);
  if (use == RunDirUse::create) return check_create(dir, kind, marker);
  if (use == RunDirUse::write) {
    read_run_marker(dir, kind);
    refuse_if_in_use(dir);
    if (kind == DirKind::run)
      if (const RunMarkerState s = read_run_state(dir); s.replacing)
        fail("{}", half_replaced(dir, s));
    check_own_files(dir, kind);
    return RunDirPlan::write;
  }
  if (marker == Marker::none) {
    const std::vector<std::string> names = contents(dir);
    if (names.empty()) return RunDirPlan::adopt_empty;
    fail(
        "cannot overwrite '{}': headlab did not create it (it holds '{}'); --overwrite replaces "
        "only a run directory of headlab",
        dir.string(), names[0]);
  }
  read_run_marker(dir, kind);
  refuse_if_in_use(dir);
  if (const std::string foreign = foreign_entry(dir, kind); !foreign.empty())
    fail("cannot overwrite '{}': it holds '{}', which headlab did not write; move it away first",
         dir.string(), foreign);
  return RunDirPlan::overwrite;
}

RunDirClaim::RunDirClaim(fs::path dir, std::string id, int lock_fd)
    : dir_(std::move(dir)), id_(std::move(id)), fd_(lock_fd) {}

RunDirClaim::RunDirClaim(RunDirClaim&& other) noexcept
    : dir_(std::move(other.dir_)), id_(std::move(other.id_)), fd_(other.fd_) {
  other.fd_ = -1;
}

RunDirClaim& RunDirClaim::operator=(RunDirClaim&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    dir_ = std::move(other.dir_);
    id_ = std::move(other.id_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

RunDirClaim::~RunDirClaim() {
  if (fd_ >= 0) ::close(fd_);
}

RunDirClaim claim_run_dir(const fs::path& dir, RunDirUse use, DirKind kind) {
  if (check_run_dir(dir, use, kind) == RunDirPlan::create) make_directories(dir);
  // The claim owns the lock from here on, so an error below releases it.
  RunDirClaim claim(dir, "", lock_dir(dir));
  // Checked again under the lock: another process may have claimed it in between.
  const RunDirPlan plan = check_run_dir(dir, use, kind);
  std::string id;
  if (plan == RunDirPlan::write) {
    id = read_run_marker(dir, kind);
  } else {
    nlohmann::json extra = nlohmann::json::object();
    if (plan == RunDirPlan::overwrite) {
      // Readers see the replacement before anything is removed (read_run_stably).
      const std::string old_id = read_run_marker(dir, kind);
      write_marker(dir, kind, old_id, {{"replacing", true}});
      for (const std::string& name : contents(dir))
        if (name != kMarker) remove_tree(dir / name);
      extra["replaces"] = old_id;
    }
    id = new_id();
    write_marker(dir, kind, id, extra);
  }
  claim.id_ = id;
  return claim;
}

}  // namespace headlab
