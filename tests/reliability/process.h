#pragma once
// Runs the headlab CLI (HEADLAB_CLI) as a child process for the reliability tests: captured
// stdout and stderr, a hard time limit, and the hostile conditions the tests need (a file-size
// limit standing in for a full disk, a SIGKILL after a delay, extra environment such as the
// kill shim's LD_PRELOAD).

#include <sys/resource.h>

#include <filesystem>
#include <string>
#include <vector>

namespace headlab::testing {

struct RunOptions {
  std::vector<std::string> env;    // "NAME=value", added to (or replacing in) the environment
  double timeout_seconds = 300;    // then SIGKILL, and RunResult::timed_out
  double kill_after_seconds = -1;  // >= 0: SIGKILL after this delay (a crash, not a timeout)
  rlim_t file_size_limit = RLIM_INFINITY;      // RLIMIT_FSIZE; SIGXFSZ is ignored, so write() fails
  rlim_t address_space_limit = RLIM_INFINITY;  // RLIMIT_AS (ulimit -v), in bytes
  std::filesystem::path cwd;                   // empty: the source directory
  std::filesystem::path program;  // empty: HEADLAB_CLI (e.g. mpirun, for the distributed tests)
  // Where the child's stdout / stderr go instead of being captured (/dev/full, a pipe's write
  // end given as /proc/self/fd/N is not needed: see stdout_closed_pipe).
  std::filesystem::path stdout_path, stderr_path;
  // stdout (or stderr) is a pipe whose read end is closed: every write fails with EPIPE.
  bool stdout_closed_pipe = false, stderr_closed_pipe = false;
};

struct RunResult {
  int exit_code = -1;  // -1 when ended by a signal
  int signal = 0;      // the signal that ended it, 0 if it exited
  bool timed_out = false;
  bool killed = false;  // ended by kill_after_seconds
  double seconds = 0;
  long max_rss_kb = 0;  // the child's peak resident memory (getrusage via wait4)
  std::string out, err;
  std::string command;  // for messages

  // The lines of err, without the trailing newline.
  std::vector<std::string> err_lines() const;
  // "exit 2" / "signal 9 (timed out)" plus stderr, for failure messages.
  std::string describe() const;
};

// Runs HEADLAB_CLI (or options.program) with `args`. Never throws for the child's behaviour; throws
// std::runtime_error when the child cannot be started.
RunResult run_cli(const std::vector<std::string>& args, const RunOptions& options = {});

// HEADLAB_CLI started in the background, to signal it or run another command beside it; wait()
// gives what run_cli gives. Destroying it kills and reaps a child that still runs.
class CliProcess {
 public:
  CliProcess(const std::vector<std::string>& args, const RunOptions& options = {});
  ~CliProcess();
  CliProcess(const CliProcess&) = delete;
  CliProcess& operator=(const CliProcess&) = delete;

  int pid() const { return pid_; }
  void signal(int sig);
  // Whether it still runs (reaps it if it ended; wait() then returns at once).
  bool running();
  RunResult wait();

 private:
  RunOptions options_;
  RunResult result_;
  std::filesystem::path out_path_, err_path_;
  int pid_ = -1;
  int status_ = 0;
  bool reaped_ = false;
  long max_rss_kb_ = 0;
  double start_ = 0;
};

// Splits a line of arguments on spaces; '...' groups words, \n \t \\ \' are escapes, and
// {name} placeholders are replaced from `vars` ("{out}" -> vars["out"]).
std::vector<std::string> split_args(const std::string& line,
                                    const std::vector<std::pair<std::string, std::string>>& vars);

// A fresh empty directory under the temporary directory, removed with its contents on
// destruction.
class TempDir {
 public:
  explicit TempDir(const std::string& tag);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

// The source tree (HEADLAB_SOURCE_DIR).
std::filesystem::path source_dir();

}  // namespace headlab::testing
