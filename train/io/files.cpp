#include "train/io/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "core/error.h"

namespace headlab {
namespace fs = std::filesystem;

namespace {

[[noreturn]] void fail_errno(const char* what, const fs::path& path, int err) {
  fail("cannot {} '{}': {}", what, path.string(), std::strerror(err));
}

int open_retry(const char* path, int flags, mode_t mode = 0) {
  int fd;
  do fd = ::open(path, flags | O_CLOEXEC, mode);
  while (fd < 0 && errno == EINTR);
  return fd;
}

// Opening for writing with O_NOFOLLOW fails with ELOOP on a symbolic link: say so.
[[noreturn]] void fail_create(const fs::path& path, int err) {
  if (err == ELOOP) fail("cannot write '{}': it is a symbolic link", path.string());
  fail_errno("create", path, err);
}

struct FdCloser {
  int fd;
  ~FdCloser() { ::close(fd); }
};

void write_all(int fd, const void* data, size_t bytes, const fs::path& path) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd, p, bytes);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail_errno("write", path, errno);
    }
    if (n == 0) fail_errno("write", path, EIO);
    p += n;
    bytes -= static_cast<size_t>(n);
  }
}

std::string size_text(uint64_t bytes) {
  return bytes % (1 << 20) == 0 ? fmt::format("{} MiB", bytes >> 20)
                                : fmt::format("{} bytes", bytes);
}

}  // namespace

const char* file_kind(unsigned mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

DurableFile::DurableFile(const fs::path& path, Create create) : path_(path) {
  const int how = create == Create::exclusive ? O_EXCL : O_TRUNC;
  fd_ = open_retry(path.c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW | how, 0644);
  if (fd_ < 0) fail_create(path_, errno);
}

DurableFile::~DurableFile() {
  if (fd_ >= 0) ::close(fd_);
}

void DurableFile::write(const void* data, size_t bytes) {
  HEADLAB_ASSERT(fd_ >= 0);
  write_all(fd_, data, bytes, path_);
}

void DurableFile::commit() {
  HEADLAB_ASSERT(fd_ >= 0);
  if (::fsync(fd_) != 0) fail_errno("fsync", path_, errno);
  const int fd = fd_;
  fd_ = -1;
  // close() after a successful fsync can still report a deferred error (NFS); never retry it.
  if (::close(fd) != 0 && errno != EINTR) fail_errno("close", path_, errno);
}

void write_file_durable(const fs::path& path, std::string_view content) {
  DurableFile file(path);
  file.write(content);
  file.commit();
}

void write_file_atomic(const fs::path& path, std::string_view content) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    fail("cannot replace '{}': it is {}, not a file headlab wrote", path.string(),
         file_kind(st.st_mode));
  fs::path tmp = path;
  tmp += ".tmp";
  if (::lstat(tmp.c_str(), &st) == 0) {  // a stale temporary file of a crashed write
    if (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode))
      fail("cannot write '{}': it is {}, not a file headlab wrote", tmp.string(),
           file_kind(st.st_mode));
    if (::unlink(tmp.c_str()) != 0) fail_errno("remove", tmp, errno);
  }
  try {
    DurableFile file(tmp, DurableFile::Create::exclusive);
    file.write(content);
    file.commit();
    rename_path(tmp, path);
  } catch (...) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    throw;
  }
  fs::path parent = path.parent_path();
  fsync_directory(parent.empty() ? fs::path(".") : parent);
}

AppendFile::AppendFile(const fs::path& path) : path_(path) {
  fd_ = open_retry(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK, 0644);
  if (fd_ < 0) fail_create(path_, errno);
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    const int err = errno;
    ::close(fd_);
    fd_ = -1;
    if (st.st_mode == 0) fail_errno("stat", path_, err);
    fail("cannot write '{}': it is {}, not a file headlab wrote", path_.string(),
         file_kind(st.st_mode));
  }
}

AppendFile::~AppendFile() {
  if (fd_ >= 0) ::close(fd_);
}

void AppendFile::write(std::string_view text) {
  HEADLAB_ASSERT(fd_ >= 0);
  write_all(fd_, text.data(), text.size(), path_);
}

std::string read_input_file(const fs::path& path, uint64_t max_bytes, const std::string& what) {
  const std::string name = path.string();
  auto cannot = [&](int err) {
    fail("{}: cannot read the {} ({})", name, what, std::strerror(err));
  };
  // O_NONBLOCK: a FIFO without a writer must not hang the open; reads then block as usual.
  const int fd = open_retry(path.c_str(), O_RDONLY | O_NONBLOCK);
  if (fd < 0) cannot(errno);
  FdCloser closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) cannot(errno);
  if (S_ISDIR(st.st_mode)) fail("{}: is a directory, expected a {}", name, what);
  auto too_large = [&] { fail("{}: the {} is larger than {}", name, what, size_text(max_bytes)); };
  if (S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) > max_bytes) too_large();
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) cannot(errno);
  std::string out;
  char chunk[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) cannot(errno);
    if (n == 0) return out;
    out.append(chunk, static_cast<size_t>(n));
    if (out.size() > max_bytes) too_large();
  }
}

std::string read_file(const fs::path& path, uint64_t max_bytes) {
  // O_NONBLOCK: opening a FIFO planted in place of a file must not hang; no effect on files.
  const int fd = open_retry(path.c_str(), O_RDONLY | O_NONBLOCK);
  if (fd < 0) fail_errno("open", path, errno);
  FdCloser closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) fail_errno("stat", path, errno);
  if (!S_ISREG(st.st_mode))
    fail("cannot read '{}': not a regular file ({})", path.string(), file_kind(st.st_mode));
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size > max_bytes)
    fail("cannot read '{}': it is {} bytes, more than the limit of {}", path.string(), size,
         max_bytes);
  std::string out(size, '\0');
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::read(fd, out.data() + done, size - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail_errno("read", path, errno);
    }
    if (n == 0) break;  // the file shrank while we read it
    done += static_cast<size_t>(n);
  }
  out.resize(done);
  return out;
}

void fsync_directory(const fs::path& dir) {
  const int fd = open_retry(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) fail_errno("open directory", dir, errno);
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  // Some file systems do not support fsync on directories; their renames are durable anyway.
  if (rc != 0 && err != EINVAL && err != ENOTSUP) fail_errno("fsync directory", dir, err);
}

void make_directories(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail("cannot create directory '{}': {}", dir.string(), ec.message());
  if (!fs::is_directory(dir, ec))
    fail("cannot create directory '{}': it exists and is not a directory", dir.string());
}

fs::path absolute_normal_path(const fs::path& path) {
  std::error_code ec;
  fs::path p = fs::absolute(path, ec);
  if (ec) fail("cannot make '{}' an absolute path: {}", path.string(), ec.message());
  p = p.lexically_normal();
  if (!p.has_filename() && p.has_parent_path()) p = p.parent_path();  // "dir/" -> "dir"
  return p;
}

void rename_path(const fs::path& from, const fs::path& to) {
  if (::rename(from.c_str(), to.c_str()) != 0)
    fail("cannot rename '{}' to '{}': {}", from.string(), to.string(), std::strerror(errno));
}

void replace_symlink(const fs::path& link, const std::string& target) {
  fs::path tmp = link;
  tmp += ".tmp";
  if (::unlink(tmp.c_str()) != 0 && errno != ENOENT) fail_errno("remove", tmp, errno);
  if (::symlink(target.c_str(), tmp.c_str()) != 0) fail_errno("create symbolic link", tmp, errno);
  if (::rename(tmp.c_str(), link.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    fail("cannot rename '{}' to '{}': {}", tmp.string(), link.string(), std::strerror(err));
  }
  fs::path parent = link.parent_path();
  fsync_directory(parent.empty() ? fs::path(".") : parent);
}

void remove_tree(const fs::path& path) {
  std::error_code ec;
  fs::remove_all(path, ec);
  if (ec) fail("cannot remove '{}': {}", path.string(), ec.message());
}

}  // namespace headlab
