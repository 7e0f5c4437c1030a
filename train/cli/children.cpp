#include "train/cli/children.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "core/error.h"
#include "train/cli/signals.h"

extern char** environ;

namespace headlab::cli {
namespace {

constexpr size_t kKeptOutput = 4096;

// In the child, between fork and exec: only async-signal-safe calls.
[[noreturn]] void exec_child(char* const* argv, int err_write, int null_fd, pid_t sweep) {
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (::getppid() != sweep) ::_exit(128 + SIGTERM);  // the sweep died before prctl
  ::dup2(null_fd, 0);
  ::dup2(null_fd, 1);
  ::dup2(err_write, 2);
  ::execve(argv[0], argv, environ);
  ::_exit(127);
}

std::string last_line(const std::string& text) {
  const size_t end = text.find_last_not_of("\r\n");
  if (end == std::string::npos) return "";
  const size_t newline = text.rfind('\n', end);
  const size_t begin = newline == std::string::npos ? 0 : newline + 1;
  return text.substr(begin, end + 1 - begin);
}

}  // namespace

ChildRuns::~ChildRuns() {
  if (children_.empty()) return;
  terminate_all();
  // A grace period for their checkpoints, then SIGKILL.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!children_.empty()) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      auto it = children_.find(pid);
      if (it != children_.end()) {
        ::close(it->second.err_fd);
        children_.erase(it);
      }
      continue;
    }
    if (pid < 0 && errno != EINTR) break;
    if (std::chrono::steady_clock::now() > deadline)
      for (const auto& [p, c] : children_) ::kill(p, SIGKILL);
    poll_outputs(50);
    for (auto& [p, c] : children_) drain(c);
  }
}

void ChildRuns::start(size_t index, const std::vector<std::string>& args) {
  std::vector<std::string> owned = args;
  std::vector<char*> argv;
  for (std::string& a : owned) argv.push_back(a.data());
  argv.push_back(nullptr);
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0)
    fail("cannot start {}: pipe: {}", args[0], std::strerror(errno));
  const int null_fd = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  const pid_t sweep = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) exec_child(argv.data(), pipe_fds[1], null_fd, sweep);
  const int err = errno;
  ::close(pipe_fds[1]);
  if (null_fd >= 0) ::close(null_fd);
  if (pid < 0) {
    ::close(pipe_fds[0]);
    fail("cannot start {}: fork: {}", args[0], std::strerror(err));
  }
  ::setpgid(pid, pid);  // also here: no race with a signal forwarded right away
  ::fcntl(pipe_fds[0], F_SETFL, O_NONBLOCK);
  children_[pid] = Child{index, pipe_fds[0], {}};
  if (forwarded_) ::kill(pid, SIGTERM);
}

void ChildRuns::drain(Child& child) {
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(child.err_fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) child.eof = true;
    if (n <= 0) return;
    child.err.append(buf, static_cast<size_t>(n));
    if (child.err.size() > 2 * kKeptOutput) child.err.erase(0, child.err.size() - kKeptOutput);
  }
}

void ChildRuns::poll_outputs(int ms) {
  std::vector<pollfd> fds;
  for (const auto& [pid, c] : children_)
    if (!c.eof) fds.push_back({c.err_fd, POLLIN, 0});
  if (fds.empty()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    return;
  }
  ::poll(fds.data(), fds.size(), ms);  // EINTR (a signal) just ends the wait early
}

void ChildRuns::terminate_all() {
  for (const auto& [pid, c] : children_) ::kill(pid, SIGTERM);
}

std::optional<ChildRuns::Exited> ChildRuns::wait_one() {
  while (!children_.empty()) {
    if (stop_signal() != 0 && !forwarded_) {
      forwarded_ = true;
      terminate_all();
    }
    for (auto& [pid, c] : children_) drain(c);
    for (auto it = children_.begin(); it != children_.end(); ++it) {
      int status = 0;
      const pid_t done = ::waitpid(it->first, &status, WNOHANG);
      if (done != it->first) continue;
      Child child = std::move(it->second);
      children_.erase(it);
      drain(child);  // the rest of what it wrote: its write end is closed now
      ::close(child.err_fd);
      Exited e;
      e.index = child.index;
      e.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      e.last_line = last_line(child.err);
      return e;
    }
    poll_outputs(100);
  }
  return std::nullopt;
}

}  // namespace headlab::cli
