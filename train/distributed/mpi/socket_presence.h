#pragma once
// "Are you there?" outside MPI: each rank listens on a TCP port of its own, a thread of its own
// answers, and a rank that asks connects to every other rank's port and reads the answer. The
// presence call of the world (mpi_presence.h) asks this way because MPI itself may not be usable
// then: after a whole host died, Open MPI's progress engine in a survivor can sit inside any MPI
// call (printing its notice of the lost peer and waiting for mpirun), so an MPI question would
// never return. A rank whose process is gone refuses the connection (its host's kernel closed
// the port) or, with its whole host gone, never answers; a live rank answers within 10 ms. An
// answer is the job's nonce, the rank and whether it is leaving (it reported its own error and
// ends the job), so a port reused by another process, or another job's rank, is never taken for
// this job's rank.

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace headlab::mpi {

class SocketPresence {
 public:
  // Where a rank listens: its port and up to kAddresses of its host's IPv4 addresses (network
  // byte order), in a fixed-size record that the ranks exchange.
  static constexpr int kAddresses = 8;
  struct Address {
    uint32_t ip[kAddresses] = {};
    uint16_t port = 0;
    uint16_t count = 0;  // 0: this rank could not listen
  };
  enum class Answer : uint8_t { kSilent, kHere, kLeaving };

  // Listens on an ephemeral port on every interface; a failure only leaves the rank without a
  // port (address().count == 0).
  SocketPresence();
  ~SocketPresence();  // stops answering
  SocketPresence(const SocketPresence&) = delete;
  SocketPresence& operator=(const SocketPresence&) = delete;

  const Address& address() const { return mine_; }
  // Given the job's nonce, this rank and every rank's address (by rank), starts answering.
  void start(uint64_t nonce, int rank, std::vector<Address> peers);
  // From now on this rank answers that it is leaving.
  void set_leaving() { leaving_.store(true); }

  // Asks the given ranks (all others when empty), for up to `seconds` in all: each rank's
  // answer (this rank kHere; a rank without a port kSilent).
  std::vector<Answer> ask(double seconds, const std::vector<int>& ranks = {}) const;

 private:
  void answer_loop();

  int listener_ = -1;
  Address mine_;
  uint64_t nonce_ = 0;
  int rank_ = 0;
  std::vector<Address> peers_;
  std::atomic<bool> leaving_{false}, stop_{false};
  std::thread answerer_;
};

}  // namespace headlab::mpi
