#include "train/cli/output.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <mutex>

#include <fmt/format.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include "core/error.h"

namespace headlab::cli {
namespace {

// write(2) of all of `text`; false on an error (EPIPE included: SIGPIPE is ignored).
bool write_fd(int fd, std::string_view text) {
  while (!text.empty()) {
    const ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    text.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

class OutputSink : public spdlog::sinks::base_sink<std::mutex> {
 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    Output::get().note(std::string_view(msg.payload.data(), msg.payload.size()));
  }
  void flush_() override {}
};

}  // namespace

Output& Output::get() {
  static Output output;
  return output;
}

std::string time_stamp() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char text[16];
  std::strftime(text, sizeof text, "[%H:%M:%S] ", &tm);
  return text;
}

void Output::open_log(const std::filesystem::path& path) {
  close_log();
  log_fd_ = ::open(path.c_str(),
                   O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
  struct stat st {};
  if (log_fd_ < 0 || ::fstat(log_fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    const int err = errno;
    close_log();
    fail("cannot write '{}': {}", path.string(),
         err == ELOOP  ? "it is a symbolic link"
         : log_fd_ < 0 ? std::strerror(err)
                       : "it is not a regular file");
  }
  log_path_ = path;
}

void Output::close_log() {
  if (log_fd_ >= 0) ::close(log_fd_);
  log_fd_ = -1;
}

void Output::to_stderr(std::string_view text) {
  if (stderr_failed_) return;
  if (!write_fd(STDERR_FILENO, text)) stderr_failed_ = true;
}

void Output::to_log(std::string_view text) {
  if (log_fd_ < 0 || log_error_) return;
  if (!write_fd(log_fd_, text))
    log_error_ = fmt::format("cannot write '{}': {}", log_path_.string(), std::strerror(errno));
}

void Output::note(std::string_view text) {
  const std::string line = time_stamp() + std::string(text) + "\n";
  if (!quiet_) to_stderr(line);
  to_log(line);
}

void Output::log_only(std::string_view text) {
  to_log(time_stamp() + std::string(text) + "\n");
}

void Output::terminal(std::string_view raw) {
  if (!quiet_) to_stderr(raw);
}

void Output::final_line(std::string_view line) {
  const std::string text = std::string(line) + "\n";
  to_stderr(text);
  to_log(text);
}

void Output::log_lines(std::string_view text) {
  to_log(text);
}

void use_output_logger() {
  auto logger = spdlog::get("headlab");
  if (!logger) logger = std::make_shared<spdlog::logger>("headlab", std::make_shared<OutputSink>());
  spdlog::set_default_logger(logger);
}

}  // namespace headlab::cli
