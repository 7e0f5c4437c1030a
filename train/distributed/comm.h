#pragma once
// Comm: how the ranks of a data-parallel job talk, as the trainer, the sweep and the benchmark
// see it. The library codes against this interface only; the CLI opens the world
// (train/distributed/world.h): Open MPI's when the process was started by mpirun and headlab was built
// with MPI, else a LocalComm of one rank. Nothing here reduces numbers: every sum over ranks is
// done by headlab itself in a fixed order (train/distributed/reduce.h), so the result does not depend
// on the MPI library's choice of algorithm.
//
// Every call is collective in the MPI sense (each rank makes the same calls in the same order)
// except send/recv, which pair up. A call that cannot complete (a peer hung, stopped or is far
// behind) throws MissingRankError after the timeout, naming the ranks that did not arrive; the
// CLI then ends the whole job with one line (docs/distributed.md, "Failure").

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/error.h"

namespace headlab {

// Seconds a rank waits for a peer before it throws, until set_timeout says otherwise (the
// config's runtime.dist_timeout defaults to it).
inline constexpr double kDefaultPeerTimeout = 300;

class Comm {
 public:
  virtual ~Comm() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // "Open MPI v4.1.4, 2 ranks" or "one process"; for logs and `headlab info`.
  virtual std::string describe() const = 0;
  // Seconds a call may wait for a peer before it throws (default kDefaultPeerTimeout).
  virtual void set_timeout(double seconds) = 0;

  // Blocking point to point: messages from one rank to another arrive in the order sent, and a
  // recv must name the exact size sent.
  virtual void send(int to, std::span<const std::byte> data) = 0;
  virtual void recv(int from, std::span<std::byte> data) = 0;
  // root's `data` to every rank (every rank passes a buffer of the same size).
  virtual void broadcast(int root, std::span<std::byte> data) = 0;
  // Every rank's `mine` (the same size on every rank) into `all`, in rank order:
  // all[r * mine.size() ..] is rank r's.
  virtual void allgather(std::span<const std::byte> mine, std::span<std::byte> all) = 0;

  // Ends the waits of this comm, from any thread: the one in progress on another thread (the
  // gradient reducer's, when the backward beside it threw) throws CommInterrupted at once
  // instead of waiting for its peer, and so does every later call. The messages it abandoned
  // leave the ranks' calls unmatched, so the comm stays unusable; what follows is the end of
  // the job (the CLI reports the error that caused it). The memory of an abandoned call may
  // still be written or read by the MPI library: its owner keeps it (GradientReducer does).
  virtual void interrupt() = 0;

  // Which ranks are still there, asked from any thread, beside the job's own calls: this rank
  // asks every other one, each answers within milliseconds whatever it is doing (a thread of
  // its comm answers), and those that have not answered after `seconds` are gone (killed, or
  // their host died; a stopped one too). For the CLI, when mpirun's SIGTERM ends a job: the
  // line that names a rank that died (docs/distributed.md, "Failure").
  struct Presence {
    std::vector<int> gone;  // ranks that did not answer
    bool speaks = false;    // this rank is the lowest that answered: it alone reports
    bool reported = false;  // a rank announced it reported its own error and ended the job
    bool known = true;      // false: the comm could not ask (closing, or busy in MPI itself)
  };
  virtual Presence presence(double /*seconds*/) {
    Presence p;
    p.speaks = is_root();
    return p;
  }
  // Host names by rank, as the ranks gave them (empty where unknown: one process).
  virtual std::vector<std::string> hosts() const { return {}; }

  bool is_root() const { return rank() == 0; }
};

// Thrown by a call of a comm that was interrupted (Comm::interrupt).
class CommInterrupted : public Error {
 public:
  CommInterrupted() : Error("comm: interrupted (the step ended with an error on this rank)") {}
};

// The world of a process that runs alone: rank 0 of 1. send and recv have no peer to talk to
// and are internal errors; broadcast does nothing and allgather copies.
class LocalComm final : public Comm {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string describe() const override { return "one process"; }
  void set_timeout(double) override {}
  void interrupt() override {}  // nothing ever waits
  void send(int to, std::span<const std::byte> data) override;
  void recv(int from, std::span<std::byte> data) override;
  void broadcast(int, std::span<std::byte>) override {}
  void allgather(std::span<const std::byte> mine, std::span<std::byte> all) override;
};

// Thrown by a call that waited the timeout out, on every rank that was waiting then. Those
// ranks have taken a roll call (each told every other it was there, and listened a moment):
// `missing` are the ranks that did not answer (hung, stopped, dead or far behind). The lowest
// rank that answered `speaks` for the job: it alone reports, so a hang is one line, not one per
// waiting rank; the others end quietly.
class MissingRankError : public Error {
 public:
  MissingRankError(const std::string& message, std::vector<int> missing, bool speaks)
      : Error(message), missing_(std::move(missing)), speaks_(speaks) {}
  const std::vector<int>& missing() const { return missing_; }
  bool speaks() const { return speaks_; }

 private:
  std::vector<int> missing_;
  bool speaks_ = false;
};

// The message of a MissingRankError, from the roll call's `answered` (by rank): "rank 1 did not
// arrive in 300 s (runtime.dist_timeout): ranks 0, 2 and 3 waited for it; it hung, was stopped
// or is far behind". Each rank is named with its host ("rank 1 on hostB") when `hosts` (by
// rank; empty when unknown) holds more than one name. Every rank answered: the ranks wait for
// each other, a deadlock (their calls do not match), and the message says so.
std::string missing_ranks_message(const std::vector<bool>& answered,
                                  const std::vector<std::string>& hosts, double timeout);

// The line of ranks that ended during the run (Comm::presence's `gone`), each named with its host
// (`hosts` by rank) however many hosts there are: "rank 1 on hostB ended during the run
// (killed, crashed, or its host went down); rank 0 on hostA is still there, and the launcher
// ends the job".
std::string gone_ranks_message(const std::vector<int>& gone, int ranks,
                               const std::vector<std::string>& hosts);

// "rank 1", "ranks 0 and 2", "ranks 0, 2 and 3", each "rank R on HOST" when `hosts` names more
// than one host (or always_hosts and `hosts` knows it).
std::string ranks_text(const std::vector<int>& ranks, const std::vector<std::string>& hosts,
                       bool always_hosts = false);

// Typed helpers over the byte calls.
template <class T>
std::span<const std::byte> bytes_of(std::span<const T> s) {
  return std::as_bytes(s);
}
template <class T>
std::span<std::byte> bytes_of(std::span<T> s) {
  return std::as_writable_bytes(s);
}

// Every rank's string, in rank order (strings may differ in length).
std::vector<std::string> allgather_strings(Comm& comm, const std::string& mine);
// root's string on every rank.
std::string broadcast_string(Comm& comm, int root, std::string text);

}  // namespace headlab
