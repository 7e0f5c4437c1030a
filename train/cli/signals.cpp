#include "train/cli/signals.h"

#include <semaphore.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <initializer_list>

namespace headlab::cli {
namespace {

// Atomic, not a volatile sig_atomic_t: a process-directed signal goes to any thread that does
// not block it, so two signals can be handled at once on two threads (an OpenMP worker and the
// main thread), and the first must stay the one that counts. Lock-free, so signal-safe.
std::atomic<int> received{0};
static_assert(std::atomic<int>::is_always_lock_free);

// Posted on each SIGTERM (sem_post is async-signal-safe), for wait_for_sigterm.
sem_t sigterm_seen;

void on_stop(int signal) {
  int none = 0;
  received.compare_exchange_strong(none, signal);
  if (signal == SIGTERM) {
    const int saved = errno;
    sem_post(&sigterm_seen);
    errno = saved;
  }
}

}  // namespace

void ignore_write_signals() {
  sem_init(&sigterm_seen, 0, 0);
  std::signal(SIGPIPE, SIG_IGN);
  std::signal(SIGXFSZ, SIG_IGN);
}

void install_stop_handlers() {
  struct sigaction action {};
  action.sa_handler = on_stop;
  sigemptyset(&action.sa_mask);
  // No SA_RESETHAND: a second signal (two Ctrl-C within milliseconds, or the kernel's SIGTERM
  // after a sweep's) must not end the process between its checkpoint's writes.
  action.sa_flags = 0;
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGUSR1}) sigaction(s, &action, nullptr);
}

int stop_signal() {
  return received.load();
}

void wait_for_sigterm() {
  while (sem_wait(&sigterm_seen) != 0 && errno == EINTR) {
  }
}

const char* signal_name(int signal) {
  switch (signal) {
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    case SIGHUP:
      return "SIGHUP";
    case SIGUSR1:
      return "SIGUSR1";
    case SIGKILL:
      return "SIGKILL";
    case SIGPIPE:
      return "SIGPIPE";
    default:
      return "a signal";
  }
}

}  // namespace headlab::cli
