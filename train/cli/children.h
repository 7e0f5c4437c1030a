#pragma once
// The `headlab train` processes of a sweep, started and watched so that they never outlive it.
//
// Each child runs in its own process group, so a terminal's Ctrl-C reaches only the sweep,
// which passes one SIGTERM on to every child (each then finishes its step, writes a checkpoint
// and exits 143; `headlab sweep --resume` continues it). PR_SET_PDEATHSIG makes the kernel send
// the same SIGTERM when the sweep dies any other way (SIGKILL included). A child's stdin and
// stdout are /dev/null; its stderr is a pipe the sweep drains, keeping the last line (the child
// runs with --quiet, so that is its error or interrupt line). Destroying ChildRuns while
// children run (the sweep failed) stops them the same way and waits for them.

#include <sys/types.h>

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace headlab::cli {

class ChildRuns {
 public:
  struct Exited {
    size_t index = 0;
    int code = 0;  // the exit code, or 128 + the signal that ended it
    std::string last_line;
  };

  ChildRuns() = default;
  ChildRuns(const ChildRuns&) = delete;
  ChildRuns& operator=(const ChildRuns&) = delete;
  ~ChildRuns();

  // Starts `args` (args[0] the executable) as child `index`. Throws headlab::Error.
  void start(size_t index, const std::vector<std::string>& args);
  // Waits until a child exits; nullopt when none runs. Passes SIGTERM on to every child once a
  // stop signal reached the sweep (train/cli/signals.h).
  std::optional<Exited> wait_one();
  size_t running() const { return children_.size(); }
  // SIGTERM to every child still running.
  void terminate_all();

 private:
  struct Child {
    size_t index = 0;
    int err_fd = -1;   // the read end of its stderr
    std::string err;   // what it wrote, the last 4 KiB
    bool eof = false;  // its stderr is closed (it exited, or closed it)
  };
  void drain(Child& child);
  // Blocks up to `ms` for output of a child.
  void poll_outputs(int ms);

  std::map<pid_t, Child> children_;
  bool forwarded_ = false;
};

}  // namespace headlab::cli
