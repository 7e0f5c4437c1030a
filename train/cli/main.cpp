// headlab: the command-line front end. The library throws; this is the one place that prints
// errors and chooses exit codes (train/cli/options.h: exit_codes_text).
//
// Under mpirun every rank runs main(). An error every rank meets alike (a bad command line or
// config, a refused run directory, a non-finite loss: CollectiveError, NonFiniteError) is
// printed once, by rank 0, and every rank exits with its code. An error of one rank alone is
// printed by that rank as "headlab: error: rank R: ..." and ends the whole job at once
// (abort_world, MPI_Abort), so no other rank waits for it (docs/distributed.md, "Failure"). A
// rank that hung or is far behind is named once, by the lowest rank that waited for it
// (MissingRankError); the other waiting ranks end quietly.

#include <poll.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <mutex>
#include <new>
#include <string>
#include <thread>

#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include "core/error.h"
#include "core/one_line.h"
#include "core/openmp_wait.h"
#include "core/threads.h"
#include "core/version.h"
#include "train/cli/commands.h"
#include "train/cli/job.h"
#include "train/cli/options.h"
#include "train/cli/output.h"
#include "train/cli/signals.h"
#include "train/distributed/agree.h"
#include "train/distributed/world.h"
#include "train/run/trainer.h"

namespace {

using namespace headlab;

// libgomp reads its wait policy once, in its initializer, before main; setting the variable in
// the running process is too late, and an executable's .preinit_array runs before libc sets up
// the environment that libgomp reads, so the one way to choose for the user is a restart with it
// set (about 15 ms). The choice (core/openmp_wait.h, with its measurements): a short spin where
// the CPUs are idle at start, passive where other work runs. Beside a parallel build (load about
// 10) the flagship run at runtime.threads = 2 took 45-150 s with libgomp's default spin and
// 8.6-13 s passive, against 7-12 s on one thread; on the quiet machine passive made the M step at
// two threads 1.09x slower than the short spin (1.13x than libgomp's full spin).
//
// The choice is marked in HEADLAB_OPENMP_WAIT ("<pid> <VARIABLE>=<value>; <reason>", read by
// `headlab info`). A policy set without the mark is the user's, and kept. A mark of another
// process was inherited from the headlab that started this one (a sweep's job): the choice is
// made again, since that process looked before its siblings started; the program restarts only
// where the choice differs.
constexpr const char* kWaitMark = "HEADLAB_OPENMP_WAIT";
// /proc/stat counts in ticks of 10 ms: 40 ms gives 4 per CPU, enough to tell a busy core.
constexpr int kSampleMs = 40;

void exec_with_chosen_openmp_wait(char** argv) {
  const char* mark = std::getenv(kWaitMark);
  if (mark && std::atol(mark) == static_cast<long>(getpid())) return;  // restarted with it
  if (!mark && (std::getenv("OMP_WAIT_POLICY") || std::getenv("GOMP_SPINCOUNT"))) return;
  const int cpus = hardware_threads();
  const OpenMPWait w =
      choose_openmp_wait(cpus, cpus < 2 ? std::nullopt : sample_busy_cores(kSampleMs));
  const char* other = w.variable == "GOMP_SPINCOUNT" ? "OMP_WAIT_POLICY" : "GOMP_SPINCOUNT";
  const char* now = std::getenv(w.variable.c_str());
  const bool running_it = mark && now && w.value == now && !std::getenv(other);
  const std::string text = fmt::format("{} {}={}; {}", getpid(), w.variable, w.value, w.reason);
  if (setenv(kWaitMark, text.c_str(), 1) != 0) return;
  if (running_it) return;  // libgomp started with it already
  unsetenv(other);
  if (setenv(w.variable.c_str(), w.value.c_str(), 1) != 0) return;
  execv("/proc/self/exe", argv);
  // Still here: the exec failed. The run is correct with the policy libgomp started with, only
  // slower on a quiet or a busy machine; the processes it starts get the choice.
}

// The subcommand argv[1] names, for the error line ("headlab: error: eval: ..."); "" if none.
std::string command_name;

// "headlab: error: <command>: <rank>message" (the command unless the message names it already).
std::string error_line(const std::string& message, const std::string& rank = "") {
  const std::string line = one_line_message(message);
  const bool named = command_name.empty() || line.rfind(command_name + ": ", 0) == 0;
  return "headlab: error: " + (named ? "" : command_name + ": ") + rank + line;
}

// The error as the last line on stderr: "headlab: error: <command>: <message>" on one line.
// An error every rank met alike: rank 0 prints it, every rank returns `code`.
int report(const std::string& message, int code) {
  std::fflush(stdout);
  if (launcher_rank() == 0) cli::Output::get().final_line(error_line(message));
  return code;
}

// An error of this rank alone: with other ranks, it names this rank and ends the whole job.
int report_local(const std::string& message, int code) {
  Comm& world = cli::world();
  if (world.size() == 1) return report(message, code);
  std::fflush(stdout);
  cli::Output::get().final_line(error_line(message, fmt::format("rank {}: ", world.rank())));
  abort_world(code);
}

// Ranks waited for one that did not arrive: the lowest of them names it, once, and ends the job;
// the others say nothing and let its abort end them (after a while, they end the job themselves,
// should that rank have died in the meantime).
[[noreturn]] void report_missing(const MissingRankError& e) {
  std::fflush(stdout);
  if (e.speaks()) {
    cli::Output::get().final_line(error_line(e.what()));
  } else {  // signals (mpirun's SIGCONT, SIGTERM) cut a nap short: sleep the rest
    timespec pause{10, 0};
    while (nanosleep(&pause, &pause) != 0 && errno == EINTR) {
    }
  }
  abort_world(cli::kUsage);
}

// Held by the watcher while it asks the ranks, and by close_job: the world is not closed under
// it, and once closed it is not asked.
std::mutex watch_mutex;
bool world_closed = false;

void close_job() {
  {
    std::lock_guard lock(watch_mutex);
    world_closed = true;
  }
  close_world();
}

// A rank that died ends the job through mpirun, which sends SIGTERM to every other rank (then
// SIGKILL a second later: odls_base_sigkill_timeout) and names no rank of its own that a user
// can act on in one line. On that SIGTERM, a thread of every surviving rank asks which ranks
// are still there (Comm::presence: each rank's comm answers within milliseconds, whatever the
// rank is doing); the lowest one that is names the ranks that are not, with their hosts, in one
// line. A SIGTERM with every rank there (a stop asked of the job, or of this
// rank alone) is left to the stop handlers; a rank that reported its own error first (and
// ended the job: abort_world) said so, and nobody repeats it.
void watch_for_lost_ranks() {
  std::thread([] {
    cli::wait_for_sigterm();
    std::lock_guard lock(watch_mutex);
    if (world_closed) return;
    Comm& world = cli::world();
    const Comm::Presence p = world.presence(0.5);
    if (!p.known || p.gone.empty()) return;
    if (p.speaks && !p.reported) {
      const std::string line =
          error_line(gone_ranks_message(p.gone, world.size(), world.hosts())) + "\n";
      std::fputs(line.c_str(), stderr);  // stdio locks: beside the main thread's output
      std::fflush(stderr);
    }
    // No raise of our own: mpirun's SIGKILL ends a survivor a second later anyway, and a live
    // rank that a loaded machine kept from answering in time must not lose the graceful stop
    // that this SIGTERM may have asked for (at worst it gets a wrong line, not a lost step).
  }).detach();
}

// Only these commands run as ranks of one job; the others are one process's work.
bool runs_distributed(const std::string& command) {
  for (const char* c : {"train", "sweep", "bench", "info"})
    if (command == c) return true;
  return false;
}

// `headlab` alone: what there is to do, on stderr.
int usage(CLI::App& app) {
  std::string text = "usage: headlab COMMAND [OPTIONS]  (headlab COMMAND --help for more)\n";
  text += "commands:\n";
  for (CLI::App* sub : app.get_subcommands({}))
    text += fmt::format("  {:<10} {}\n", sub->get_name(), sub->get_description());
  text += cli::exit_codes_text() + "\n";
  std::fputs(text.c_str(), stderr);
  return cli::kUsage;
}

// Why an earlier write to stdout failed: its errno is long gone, but a closed pipe still shows.
std::string stdout_error() {
  if (cli::stdout_failure() != 0) return std::strerror(cli::stdout_failure());
  pollfd fd{STDOUT_FILENO, 0, 0};
  if (::poll(&fd, 1, 0) == 1 && (fd.revents & POLLERR)) return std::strerror(EPIPE);
  return "a write failed (a full disk?)";
}

// After a command that succeeded: what it printed must have arrived. (A failed one reported its
// error already.)
int check_outputs(int code) {
  if (code != cli::kOk) return code;
  const bool failed_before = std::ferror(stdout) != 0;
  errno = 0;
  if (std::fflush(stdout) != 0 || failed_before) {
    const std::string why = !failed_before && errno ? std::strerror(errno) : stdout_error();
    return report(fmt::format("cannot write to standard output: {}", why), cli::kUsage);
  }
  if (const auto& log = cli::Output::get().log_error()) return report(*log, cli::kUsage);
  if (cli::Output::get().stderr_failed()) return cli::kUsage;
  return code;
}

int run(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return cli::speaks_for_job() ? app.exit(e) : 0;
  } catch (const CLI::CallForAllHelp& e) {
    return cli::speaks_for_job() ? app.exit(e) : 0;
  } catch (const CLI::CallForVersion& e) {
    return cli::speaks_for_job() ? app.exit(e) : 0;
  } catch (const CLI::ParseError& e) {  // bad command line
    return report(e.what(), cli::kUsage);
  } catch (const NonFiniteError& e) {  // NaN/Inf loss, gradient or update: training stopped
    return report(e.what(), cli::kNonFinite);
  } catch (const MissingRankError& e) {  // a rank hung: named once, by the lowest that waited
    report_missing(e);
  } catch (const CollectiveError& e) {  // every rank alike: config, run directory, checkpoint
    return report(e.what(), cli::kUsage);
  } catch (const Error& e) {  // a user's mistake: config, file, checkpoint
    return report_local(e.what(), cli::kUsage);
  } catch (const std::filesystem::filesystem_error& e) {  // a path the user gave
    return report_local(e.what(), cli::kUsage);
  } catch (const InternalError& e) {
    return report_local(e.what(), cli::kFailure);
  } catch (const std::bad_alloc&) {  // more than the estimate, or the machine is busy
    return report_local("out of memory: an allocation failed (std::bad_alloc)" +
                            cli::memory_note() + "; lower the batch or model size, or free memory",
                        cli::kUsage);
  } catch (const std::exception& e) {
    return report_local(e.what(), cli::kFailure);
  } catch (...) {
    return report_local("unknown exception", cli::kFailure);
  }
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  exec_with_chosen_openmp_wait(argv);
  cli::ignore_write_signals();
  cli::set_command_line(argc, argv);
  CLI::App app{"headlab: a small C++ training framework with tape-based autodiff"};
  app.require_subcommand(1);
  app.set_version_flag("--version", HEADLAB_VERSION);
  app.footer(cli::exit_codes_text());
  int exit_code = cli::kOk;
  cli::add_train_command(app, exit_code);
  cli::add_eval_command(app, exit_code);
  cli::add_info_command(app, exit_code);
  cli::add_bench_command(app, exit_code);
  cli::add_gradcheck_command(app, exit_code);
  cli::add_analyze_command(app, exit_code);
  cli::add_sweep_command(app, exit_code);
  cli::add_export_conllu_command(app, exit_code);
  if (argc < 2) return launcher_rank() == 0 ? usage(app) : cli::kUsage;
  if (argv[1][0] != '-') {  // CLI11 would only say "A subcommand is required"
    std::string known;
    for (CLI::App* sub : app.get_subcommands({})) {
      known += (known.empty() ? "" : ", ") + sub->get_name();
      if (sub->check_name(argv[1])) command_name = sub->get_name();
    }
    if (command_name.empty())
      return report(std::string("unknown command '") + argv[1] + "' (commands: " + known + ")",
                    cli::kUsage);
  }
  // Under mpirun only rank 0 prints an error found before the world is open.
  if (launched_by_mpi() && launcher_size() > 1 && !command_name.empty() &&
      !runs_distributed(command_name))
    return report(fmt::format("headlab {} runs as one process; run it without {}", command_name,
                              launcher_name()),
                  cli::kUsage);
  try {
    cli::set_world(open_world());
  } catch (const Error& e) {
    return report(e.what(), cli::kUsage);
  }
  // Every rank of a job runs the same command: a rank started as `headlab info` beside a
  // `headlab train` is named at once, before rank 0 waits for a collective it never joins.
  if (cli::world().size() > 1) try {
      check_same_on_every_rank(cli::world(), "the command it runs",
                               command_name.empty() ? "headlab" : "headlab " + command_name);
    } catch (const Error& e) {
      const int code = report(e.what(), cli::kUsage);
      close_job();
      return code;
    }
  if (cli::world().size() > 1) watch_for_lost_ranks();
  const int failed = run(app, argc, argv);
  const int code = check_outputs(failed >= 0 ? failed : exit_code);
  close_job();
  return code;
}
