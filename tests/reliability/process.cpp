#include "tests/reliability/process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

extern char** environ;

namespace headlab::testing {

namespace fs = std::filesystem;

namespace {

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::vector<std::string> merged_environment(const std::vector<std::string>& extra) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    const std::string entry = *e;
    const std::string name = entry.substr(0, entry.find('='));
    bool replaced = false;
    for (const auto& x : extra) replaced |= x.substr(0, x.find('=')) == name;
    if (!replaced) env.push_back(entry);
  }
  env.insert(env.end(), extra.begin(), extra.end());
  return env;
}

std::vector<char*> c_strings(std::vector<std::string>& v) {
  std::vector<char*> out;
  for (auto& s : v) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

}  // namespace

fs::path source_dir() {
  return fs::path(HEADLAB_SOURCE_DIR);
}

std::vector<std::string> RunResult::err_lines() const {
  std::vector<std::string> lines;
  std::istringstream in(err);
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

std::string RunResult::describe() const {
  std::string how = signal ? fmt::format("signal {}", signal) : fmt::format("exit {}", exit_code);
  if (timed_out) how += " (timed out)";
  if (killed) how += " (killed on purpose)";
  std::string shown =
      err.size() > 3000 ? err.substr(0, 1500) + "\n[...]\n" + err.substr(err.size() - 1500) : err;
  return fmt::format("{}\n  after {:.2f} s: {}\n  stderr:\n{}", command, seconds, how, shown);
}

namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// An output of the child: the given path, a pipe nobody reads, or a capture file.
int output_fd(const fs::path& path, bool closed_pipe, const fs::path& capture) {
  if (closed_pipe) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("run_cli: pipe failed");
    ::close(fds[0]);
    return fds[1];
  }
  const fs::path& target = path.empty() ? capture : path;
  const int fd = ::open(target.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error("run_cli: cannot open " + target.string());
  return fd;
}

}  // namespace

CliProcess::CliProcess(const std::vector<std::string>& args, const RunOptions& options)
    : options_(options) {
  static int counter = 0;
  const fs::path base =
      fs::temp_directory_path() / fmt::format("headlab-run-{}-{}", ::getpid(), counter++);
  out_path_ = base.string() + ".out";
  err_path_ = base.string() + ".err";
  std::vector<std::string> argv_s = {options.program.empty() ? std::string(HEADLAB_CLI)
                                                             : options.program.string()};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<std::string> env_s = merged_environment(options.env);
  std::vector<char*> argv = c_strings(argv_s), envp = c_strings(env_s);
  const std::string cwd = options.cwd.empty() ? source_dir().string() : options.cwd.string();
  for (const auto& a : argv_s) result_.command += (result_.command.empty() ? "" : " ") + a;
  const int out_fd = output_fd(options.stdout_path, options.stdout_closed_pipe, out_path_);
  const int err_fd = output_fd(options.stderr_path, options.stderr_closed_pipe, err_path_);
  start_ = now_seconds();
  pid_ = ::fork();
  if (pid_ < 0) throw std::runtime_error("run_cli: fork failed");
  if (pid_ == 0) {
    // Only async-signal-safe calls between fork and exec.
    ::dup2(out_fd, 1);
    ::dup2(err_fd, 2);
    const int null_fd = ::open("/dev/null", O_RDONLY);
    if (null_fd >= 0) ::dup2(null_fd, 0);
    ::signal(SIGPIPE, SIG_DFL);
    if (options.file_size_limit != RLIM_INFINITY) {
      ::signal(SIGXFSZ, SIG_IGN);  // kept across exec: write() then fails with EFBIG
      struct rlimit lim {
        options.file_size_limit, options.file_size_limit
      };
      ::setrlimit(RLIMIT_FSIZE, &lim);
    }
    if (options.address_space_limit != RLIM_INFINITY) {
      struct rlimit lim {
        options.address_space_limit, options.address_space_limit
      };
      ::setrlimit(RLIMIT_AS, &lim);
    }
    if (::chdir(cwd.c_str()) != 0) ::_exit(126);
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  ::close(out_fd);
  ::close(err_fd);
}

CliProcess::~CliProcess() {
  if (pid_ > 0 && !reaped_) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  std::error_code ignored;
  fs::remove(out_path_, ignored);
  fs::remove(err_path_, ignored);
}

void CliProcess::signal(int sig) {
  if (!reaped_) ::kill(pid_, sig);
}

bool CliProcess::running() {
  if (reaped_) return false;
  struct rusage usage {};
  if (::wait4(pid_, &status_, WNOHANG, &usage) == pid_) {
    reaped_ = true;
    max_rss_kb_ = usage.ru_maxrss;
    result_.seconds = now_seconds() - start_;
  }
  return !reaped_;
}

RunResult CliProcess::wait() {
  RunResult& r = result_;
  while (running()) {
    const double elapsed = now_seconds() - start_;
    if (options_.kill_after_seconds >= 0 && elapsed >= options_.kill_after_seconds && !r.killed) {
      ::kill(pid_, SIGKILL);
      r.killed = true;
    } else if (elapsed >= options_.timeout_seconds && !r.timed_out) {
      ::kill(pid_, SIGKILL);
      r.timed_out = true;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  r.max_rss_kb = max_rss_kb_;
  if (WIFEXITED(status_)) r.exit_code = WEXITSTATUS(status_);
  if (WIFSIGNALED(status_)) r.signal = WTERMSIG(status_);
  if (options_.stdout_path.empty() && !options_.stdout_closed_pipe) r.out = slurp(out_path_);
  if (options_.stderr_path.empty() && !options_.stderr_closed_pipe) r.err = slurp(err_path_);
  return r;
}

RunResult run_cli(const std::vector<std::string>& args, const RunOptions& options) {
  CliProcess process(args, options);
  return process.wait();
}

std::vector<std::string> split_args(const std::string& line,
                                    const std::vector<std::pair<std::string, std::string>>& vars) {
  std::vector<std::string> words;
  std::string word;
  bool quoted = false, have = false;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (c == '\\' && i + 1 < line.size()) {  // \n, \t, \\ and \'
      c = line[++i];
      word += c == 'n' ? '\n' : c == 't' ? '\t' : c;
      have = true;
    } else if (c == '\'') {
      quoted = !quoted;
      have = true;
    } else if (c == ' ' && !quoted) {
      if (have) words.push_back(word);
      word.clear();
      have = false;
    } else {
      word += c;
      have = true;
    }
  }
  if (have) words.push_back(word);
  for (auto& w : words)
    for (const auto& [name, value] : vars) {
      const std::string key = "{" + name + "}";
      for (size_t at = w.find(key); at != std::string::npos; at = w.find(key, at + value.size()))
        w.replace(at, key.size(), value);
    }
  return words;
}

TempDir::TempDir(const std::string& tag) {
  static int counter = 0;
  path_ = fs::temp_directory_path() /
          fmt::format("headlab-reliability-{}-{}-{}", tag, ::getpid(), counter++);
  fs::remove_all(path_);
  fs::create_directories(path_);
}

TempDir::~TempDir() {
  std::error_code ignored;
  fs::remove_all(path_, ignored);
}

}  // namespace headlab::testing
