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

// A file opened for writing (created or truncated, mode 0644). write() appends; commit() fsyncs
// and closes, reporting any error. Destroying an uncommitted file closes it without fsync (the
// caller is unwinding from an error and will discard it).
class DurableFile {
 public:
  explicit DurableFile(const std::filesystem::path& path);
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
// directory: readers see the old file or the new one, never a mix.
void write_file_atomic(const std::filesystem::path& path, std::string_view content);

// Reads a whole regular file. Throws if it is missing, not a regular file, unreadable, or
// larger than max_bytes ("'<path>' is N bytes, more than the limit of M").
std::string read_file(const std::filesystem::path& path, uint64_t max_bytes);

// fsync on a directory, making the names created or renamed in it durable.
void fsync_directory(const std::filesystem::path& dir);

// mkdir -p; throws naming the path and reason (e.g. "Not a directory" under a regular file).
void make_directories(const std::filesystem::path& dir);

// rename(2): atomic within a file system; replaces an existing file or empty directory.
void rename_path(const std::filesystem::path& from, const std::filesystem::path& to);

// Atomically points the symbolic link `link` at `target` (stored as given, normally a relative
// name): creates "<link>.tmp" (replacing a stale one), renames it over `link`, fsyncs the
// parent. At every moment `link` is either the old link or the new one.
void replace_symlink(const std::filesystem::path& link, const std::string& target);

// Removes a file or directory tree; missing is fine. Throws on failure.
void remove_tree(const std::filesystem::path& path);

}  // namespace headlab
