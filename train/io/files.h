#pragma once
// Durable file-system steps for checkpoints and run files (Linux, POSIX calls).
//
// Every failure throws one headlab::Error line naming the operation, the path and the system's
// reason (strerror), e.g. "cannot write 'runs/x/checkpoints/.tmp-step-000100/model.safetensors':
// No space left on device". Errors from write(), fsync() and close() are all checked, so a full
// disk is reported even when the kernel only notices it at fsync.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace headlab {

// A file opened for writing (mode 0644), never through a symbolic link. Create::truncate
// creates or truncates `path`; Create::exclusive creates a new regular file and fails if
// anything exists there. write() appends; commit() fsyncs and closes, reporting any error.
// Destroying an uncommitted file closes it without fsync (the caller is unwinding from an error
// and will discard it).
class DurableFile {
 public:
  enum class Create { truncate, exclusive };
  explicit DurableFile(const std::filesystem::path& path, Create create = Create::truncate);
  DurableFile(const DurableFile&) = delete;
  DurableFile& operator=(const DurableFile&) = delete;
  ~DurableFile();

  void write(const void* data, size_t bytes);
  void write(std::string_view text) { write(text.data(), text.size()); }
  // fsync + close. Throws on failure.
  void commit();
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  int fd_ = -1;
};

// Writes `content` to `path` (created or truncated) and fsyncs it.
void write_file_durable(const std::filesystem::path& path, std::string_view content);

// Writes `content` to "<path>.tmp", fsyncs it, renames it over `path` and fsyncs the parent
// directory: readers see the old file or the new one, never a mix. Only ever replaces a regular
// file: anything else at `path` (a directory, a FIFO, a symbolic link, a device) was not written
// by headlab and is refused ("cannot replace 'x': it is a FIFO, not a file headlab wrote"), as is
// anything but a regular file or a link at "<path>.tmp" (a stale temporary file is removed).
void write_file_atomic(const std::filesystem::path& path, std::string_view content);

// A file that only grows (train.log, metrics.jsonl): opened for appending, created if missing,
// never through a symbolic link, and refused unless it is a regular file. Every write is
// checked; closed on destruction.
class AppendFile {
 public:
  explicit AppendFile(const std::filesystem::path& path);
  AppendFile(const AppendFile&) = delete;
  AppendFile& operator=(const AppendFile&) = delete;
  ~AppendFile();

  // Appends all of `text`; throws naming the path and the reason (a full disk, ...).
  void write(std::string_view text);
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  int fd_ = -1;
};

// Reads a whole regular file, opened without blocking (a FIFO in its place must not hang) and
// through symbolic links. Throws if it is missing, not a regular file ("cannot read 'x': not a
// regular file (a FIFO)"), unreadable, or larger than max_bytes ("'<path>' is N bytes, more
// than the limit of M").
std::string read_file(const std::filesystem::path& path, uint64_t max_bytes);

// Reads a file the user named on the command line (a config): a regular file, or a pipe or
// device (`<(...)`, /dev/stdin) read until its end, at most max_bytes either way. `what` names
// it in messages: "<path>: cannot read the <what> (<reason>)", "<path>: is a directory,
// expected a <what>", "<path>: the <what> is larger than 16 MiB".
std::string read_input_file(const std::filesystem::path& path, uint64_t max_bytes,
                            const std::string& what);

// "a directory", "a FIFO", "a symbolic link", "a character device", ... for an lstat mode.
const char* file_kind(unsigned mode);

// fsync on a directory, making the names created or renamed in it durable.
void fsync_directory(const std::filesystem::path& dir);

// mkdir -p; throws naming the path and reason (e.g. "Not a directory" under a regular file).
void make_directories(const std::filesystem::path& dir);

// `path` made absolute (from the current directory) and normal, without a trailing separator:
// how a plugin is named in messages, in the resolved config and in run.json.
std::filesystem::path absolute_normal_path(const std::filesystem::path& path);

// rename(2): atomic within a file system; replaces an existing file or empty directory.
void rename_path(const std::filesystem::path& from, const std::filesystem::path& to);

// Atomically points the symbolic link `link` at `target` (stored as given, normally a relative
// name): creates "<link>.tmp" (replacing a stale one), renames it over `link`, fsyncs the
// parent. At every moment `link` is either the old link or the new one.
void replace_symlink(const std::filesystem::path& link, const std::string& target);

// Removes a file or directory tree; missing is fine. Throws on failure.
void remove_tree(const std::filesystem::path& path);

}  // namespace headlab
