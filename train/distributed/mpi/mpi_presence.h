#pragma once
// Which ranks of an Open MPI job are still there. The ranks ask each other on a communicator of
// their own (a duplicate of the job's), so no receive of the job ever matches one of these
// messages:
//   - the roll call, taken by every rank whose wait for a peer ran out (runtime.dist_timeout):
//     it names the ranks that did not answer, in one report from one rank (MissingRankError);
//   - the presence call (Comm::presence), made when mpirun's SIGTERM comes because a rank died:
//     a thread of each rank answers it every 10 ms, whatever the rank is doing, so the
//     survivors can tell which rank it was;
//   - the announcement of a rank that reported its own error and ends the job, so that the
//     others' presence call does not report it again as a rank that died.
// Internal to the world (mpi_world.cpp), which only the CLI links, so not installed
// (cmake/HeadlabPackage.cmake). Every MPI call is made under mpi::lock() (mpi_calls.h).

#include <mpi.h>

#include <string>
#include <thread>
#include <vector>

#include "train/distributed/comm.h"

namespace headlab::mpi {

class RankPresence {
 public:
  // Duplicates `world` (whose error handler returns errors) for its own messages.
  explicit RankPresence(MPI_Comm world);
  ~RankPresence();
  RankPresence(const RankPresence&) = delete;
  RankPresence& operator=(const RankPresence&) = delete;

  // Starts the thread that answers the other ranks' presence calls (none with one rank).
  void start_answering();
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
  // Comm::presence: asks every other rank and waits up to `seconds` for the answers.
  Comm::Presence presence(double seconds);

  // How long a roll call listens: ranks that wait answer within a nap, but a rank about to
  // reach its wait (it finishes a step first) and a busy machine's scheduler need longer.
  static constexpr double kRollCallSeconds = 2.0;

 private:
  void answer();  // the answering thread

  static constexpr int kRollCallTag = 7;
  static constexpr int kAskTag = 8, kHereTag = 9, kLeavingTag = 10;

  MPI_Comm roll_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  bool closing_ = false;  // guarded by mpi::lock(): MPI is being finalized or aborted
  std::thread answerer_;
};

}  // namespace headlab::mpi
