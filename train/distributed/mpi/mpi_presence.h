#pragma once
// Which ranks of an Open MPI job are still there. The ranks ask each other on a communicator of
// their own (a duplicate of the job's), so no receive of the job ever matches one of these
// messages:
//   - the roll call, taken by every rank whose wait for a peer ran out (runtime.dist_timeout):
//     it names the ranks that did not answer, in one report from one rank (MissingRankError);
//   - the presence call (Comm::presence), made when mpirun's SIGTERM comes because a rank died:
//     a thread of each rank answers it every 10 ms, whatever the rank is doing, so the
//     survivors can tell which rank it was. It goes over TCP (socket_presence.h) where the
//     ranks reach each other that way, since after a whole host died a survivor's MPI calls may
//     never return; else over MPI, on that communicator;
//   - the announcement of a rank that reported its own error and ends the job, so that the
//     others' presence call does not report it again as a rank that died.
// Internal to the world (mpi_world.cpp), which only the CLI links, so not installed
// (cmake/HeadlabPackage.cmake). Every MPI call is made under mpi::lock() (mpi_calls.h).

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "train/distributed/comm.h"
#include "train/distributed/mpi/socket_presence.h"

namespace headlab::mpi {

class RankPresence {
 public:
  // Duplicates `world` (whose error handler returns errors) for its own messages.
  explicit RankPresence(MPI_Comm world);
  ~RankPresence();
  RankPresence(const RankPresence&) = delete;
  RankPresence& operator=(const RankPresence&) = delete;

  // Where this rank answers presence calls outside MPI, for the other ranks.
  const SocketPresence::Address& socket_address() const { return sockets_.address(); }
  // Starts the thread that answers the other ranks' presence calls (none with one rank), given
  // the job's nonce and every rank's socket_address().
  void start_answering(uint64_t nonce, std::vector<SocketPresence::Address> addresses);
  // Before MPI_Finalize or MPI_Abort: no MPI call of this class's after it returns.
  void stop_answering();
  // Tells every other rank this one reported its own error and leaves; gives the messages
  // `seconds` to go.
  void announce_leaving(double seconds);

  // Whether another rank has called the roll (its message is waiting).
  bool roll_called() const;
  // Takes the roll call: tells every other rank this one is here, listens for kRollCallSeconds
  // and throws MissingRankError naming those that did not answer (by `hosts`, after `timeout`
  // seconds of waiting); where every rank answered (a deadlock), the message says what this
  // rank waited for.
  [[noreturn]] void roll_call(const std::string& what, const std::vector<std::string>& hosts,
                              double timeout) const;
  // Whether this rank's neighbours (rank +- 1) answer over TCP within `seconds`: a job whose
  // ranks all say yes asks over TCP (use_sockets), else over MPI (a firewall between hosts, or a
  // rank that could not listen).
  bool neighbours_answer(double seconds) const;
  void use_sockets(bool yes) { use_sockets_ = yes; }
  // Comm::presence: asks every other rank and waits up to `seconds` for the answers.
  Comm::Presence presence(double seconds);

  // How long a roll call listens: ranks that wait answer within a nap, but a rank about to
  // reach its wait (it finishes a step first) and a busy machine's scheduler need longer.
  static constexpr double kRollCallSeconds = 2.0;

 private:
  void answer();  // the answering thread
  // The presence call over TCP; `unknown` when this rank is closing.
  Comm::Presence presence_by_sockets(double seconds) const;
  // Whether a rank announced over MPI that it reported its own error, if MPI tells within `wait`.
  bool leaving_announced(std::chrono::milliseconds wait) const;
  static constexpr std::chrono::milliseconds kLeavingCheck{150};

  static constexpr int kRollCallTag = 7;
  static constexpr int kAskTag = 8, kHereTag = 9, kLeavingTag = 10;

  MPI_Comm roll_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  // Set under mpi::lock(): MPI is being finalized or aborted. Atomic: the TCP presence call,
  // which has no lock, reads it too.
  std::atomic<bool> closing_{false};
  SocketPresence sockets_;
  bool use_sockets_ = false;
  std::thread answerer_;
};

}  // namespace headlab::mpi
