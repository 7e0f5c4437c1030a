// The world through Open MPI (train/distributed/world.h). Every call is non-blocking underneath and
// waited for with a deadline (runtime.dist_timeout), so a rank whose peer hung reports it
// instead of waiting forever; a peer that died is noticed by mpirun, which ends the job. A wait
// that runs out takes a roll call, so the job's one report names the ranks that did not arrive
// (MissingRankError, train/distributed/comm.h). The roll call, the presence call that tells the
// survivors which rank died when mpirun ends the job, and the thread that answers it are
// mpi_presence.h. Every MPI call, on whichever thread, is made under one lock (mpi::lock(),
// mpi_calls.h): MPI_THREAD_SERIALIZED.

#include <mpi.h>

#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "train/distributed/mpi/mpi_calls.h"
#include "train/distributed/mpi/mpi_presence.h"
#include "train/distributed/world.h"

namespace headlab {
namespace {

using mpi::error_text;
using mpi::locked;
using mpi::nap;

bool we_initialised = false;

class MpiComm final : public Comm {
 public:
  MpiComm() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);  // errors come back to us
    presence_.emplace(MPI_COMM_WORLD);
    // Every rank's host name, for the report of a rank that did not arrive (a namespaced
    // host's own UTS name: gethostname, not the address mpirun was given).
    std::string mine(kHostName, '\0');
    if (gethostname(mine.data(), mine.size() - 1) != 0) mine[0] = '?';
    std::string all(kHostName * static_cast<size_t>(size_), '\0');
    allgather(std::as_bytes(std::span(mine)), std::as_writable_bytes(std::span(all)));
    for (int r = 0; r < size_; ++r) hosts_.push_back(all.substr(r * kHostName, kHostName).c_str());
    // Where each rank answers presence calls outside MPI, and the job's nonce its answers carry.
    using Address = mpi::SocketPresence::Address;
    std::vector<Address> addresses(static_cast<size_t>(size_));
    allgather(std::as_bytes(std::span(&presence_->socket_address(), 1)),
              std::as_writable_bytes(std::span(addresses)));
    uint64_t nonce =
        rank_ == 0 ? (uint64_t{std::random_device{}()} << 32) ^ std::random_device{}() : 0;
    broadcast(0, std::as_writable_bytes(std::span(&nonce, 1)));
    presence_->start_answering(nonce, std::move(addresses));
    // Presence calls go over TCP when every rank reaches its neighbours that way (a neighbour
    // that has not started answering yet holds the connection in its port's backlog).
    if (size_ > 1) {
      unsigned char reached = presence_->neighbours_answer(kReachSeconds) ? 1 : 0;
      std::vector<unsigned char> all_reached(static_cast<size_t>(size_));
      allgather(std::as_bytes(std::span(&reached, 1)),
                std::as_writable_bytes(std::span(all_reached)));
      presence_->use_sockets(std::find(all_reached.begin(), all_reached.end(), 0) ==
                             all_reached.end());
    }
  }
  ~MpiComm() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string describe() const override {
    return fmt::format("{}, {} ranks", mpi_library(), size_);
  }
  void set_timeout(double seconds) override { timeout_ = seconds; }
  void interrupt() override { interrupted_.store(true); }
  std::vector<std::string> hosts() const override { return hosts_; }
  Presence presence(double seconds) override { return presence_->presence(seconds); }
  // Before MPI_Finalize or MPI_Abort: no other thread makes an MPI call after this.
  void stop_answering() { presence_->stop_answering(); }
  // A rank that reported its own error and ends the job (abort_world) tells every other one.
  void announce_leaving(double seconds) { presence_->announce_leaving(seconds); }

  void send(int to, std::span<const std::byte> data) override {
    for (size_t off = 0; off < data.size() || off == 0; off += kPiece) {
      const int n = piece(data.size(), off);
      MPI_Request r;
      start();
      check(locked([&] {
              return MPI_Isend(data.data() + off, n, MPI_BYTE, to, 0, MPI_COMM_WORLD, &r);
            }),
            "send", to);
      wait(r, fmt::format("rank {} to take a message", to), true);
      if (data.empty()) break;
    }
  }
  void recv(int from, std::span<std::byte> data) override {
    for (size_t off = 0; off < data.size() || off == 0; off += kPiece) {
      const int n = piece(data.size(), off);
      MPI_Request r;
      start();
      check(locked([&] {
              return MPI_Irecv(data.data() + off, n, MPI_BYTE, from, 0, MPI_COMM_WORLD, &r);
            }),
            "recv", from);
      wait(r, fmt::format("a message from rank {}", from), true);
      if (data.empty()) break;
    }
  }
  void broadcast(int root, std::span<std::byte> data) override {
    for (size_t off = 0; off < data.size(); off += kPiece) {
      MPI_Request r;
      start();
      check(locked([&] {
              return MPI_Ibcast(data.data() + off, piece(data.size(), off), MPI_BYTE, root,
                                MPI_COMM_WORLD, &r);
            }),
            "broadcast", root);
      wait(r, fmt::format("a broadcast from rank {}", root), false);
    }
  }
  void allgather(std::span<const std::byte> mine, std::span<std::byte> all) override {
    if (mine.size() > static_cast<size_t>(INT_MAX))
      fail("allgather of {} bytes is over MPI's limit", mine.size());
    const int n = static_cast<int>(mine.size());
    MPI_Request r;
    start();
    check(locked([&] {
            return MPI_Iallgather(mine.data(), n, MPI_BYTE, all.data(), n, MPI_BYTE, MPI_COMM_WORLD,
                                  &r);
          }),
          "allgather", -1);
    wait(r, "every rank to join an exchange", false);
  }

 private:
  static constexpr size_t kPiece = size_t{1} << 30;  // bytes per MPI call (counts are int)
  static constexpr size_t kHostName = 256;           // bytes per host name in the exchange
  // How long a rank waits at start-up for its neighbours' TCP answers (a dropped connection
  // behind a firewall never answers; a live neighbour answers within 10 ms).
  static constexpr double kReachSeconds = 2.0;

  static int piece(size_t size, size_t off) {
    return static_cast<int>(std::min(kPiece, size - std::min(size, off)));
  }

  void check(int code, const char* call, int peer) const {
    if (code != MPI_SUCCESS)
      fail("MPI {} {}failed: {}", call,
           peer >= 0 ? fmt::format("with rank {} ", peer) : std::string(), error_text(code));
  }

  // Tests `r` until it completes: spinning for the first millisecond (a transfer between ranks
  // that are in step takes about that; Open MPI moves a large message only inside MPI calls, so
  // a rank that slept between tests would slow every transfer down), then yielding the core
  // between tests, as Open MPI's blocking calls do when ranks share cores, while it waits for
  // a rank that is behind; past kYieldSeconds it sleeps a millisecond between tests (a yield
  // with nothing else to run keeps the core busy: a rank waiting out a peer that hung, or one
  // that runs another command, spun at 70-90% of a core; with the naps it uses about 1%). A
  // sleeping wait also answers a roll call another rank took. After timeout_ seconds it takes
  // one itself. A pause of this process itself (more than a second between two looks at the
  // clock: it was stopped, SIGSTOP, or not scheduled) is not waiting: a rank that was stopped
  // and continued (mpirun continues it to end the job after another rank gave up on it) must
  // not blame the others for its own pause.
  //
  // An interrupt (Comm::interrupt, from another thread) ends the wait at once: a receive or send
  // is cancelled where MPI can (Open MPI cancels a receive that no message matched yet, never a
  // send) and freed, a collective is left as it is (MPI allows neither for one); then it throws
  // CommInterrupted.
  void wait(MPI_Request& r, const std::string& what, bool point_to_point) {
    using Clock = std::chrono::steady_clock;
    Clock::time_point last = Clock::now();
    double waited = 0;
    for (long tests = 1;; ++tests) {
      int done = 0;
      check(locked([&] { return MPI_Test(&r, &done, MPI_STATUS_IGNORE); }), "test", -1);
      if (done) return;
      if (interrupted_.load(std::memory_order_relaxed)) abandon(r, point_to_point);
      const bool patient = waited > 1e-3;  // past the first millisecond: yield between tests
      if (waited > kYieldSeconds) {
        nap();  // far behind: the core stays free
        if (presence_->roll_called()) presence_->roll_call(what, hosts_, timeout_);
      } else if (patient) {
        sched_yield();
      }
      if (!patient && tests % 256 != 0) continue;  // a look at the clock per yield, else per 256
      const Clock::time_point now = Clock::now();
      const double step = std::chrono::duration<double>(now - last).count();
      last = now;
      if (step < 1.0) waited += step;
      if (waited > timeout_) presence_->roll_call(what, hosts_, timeout_);
    }
  }

  // Every call of an interrupted comm throws, before it posts anything.
  void start() const {
    if (interrupted_.load()) throw CommInterrupted();
  }

  [[noreturn]] void abandon(MPI_Request& r, bool point_to_point) {
    if (point_to_point)
      locked([&] {
        MPI_Cancel(&r);
        return MPI_Request_free(&r);
      });
    throw CommInterrupted();
  }

  // How long a wait yields before it sleeps: longer than the steps of the models headlab
  // trains take to drift apart, so ranks in step never sleep.
  static constexpr double kYieldSeconds = 0.05;
  int rank_ = 0, size_ = 1;
  std::atomic<bool> interrupted_{false};
  std::optional<mpi::RankPresence> presence_;  // made once MPI_COMM_WORLD returns errors
  std::vector<std::string> hosts_;             // by rank
  double timeout_ = kDefaultPeerTimeout;
};

MpiComm* the_world = nullptr;  // the comm open_world made, for close_world and abort_world

MpiComm::~MpiComm() {
  stop_answering();
  if (the_world == this) the_world = nullptr;
}

}  // namespace

std::string mpi_library() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING];
  int length = 0;
  if (MPI_Get_library_version(text, &length) != MPI_SUCCESS) return "MPI";
  std::string v(text, static_cast<size_t>(length));
  const size_t end = v.find_first_of(",\n");
  return end == std::string::npos ? v : v.substr(0, end);
}

std::unique_ptr<Comm> open_world() {
  if (!launched_by_mpi()) return std::make_unique<LocalComm>();
  int provided = 0;
  // SERIALIZED: the gradient reducer's chain thread makes the MPI calls during a backward
  // (train/distributed/reduce.h), never at the same time as the main thread.
  const int code = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
  if (code != MPI_SUCCESS) fail("MPI_Init failed: {}", error_text(code));
  we_initialised = true;
  if (provided < MPI_THREAD_SERIALIZED)
    fail(
        "MPI_Init_thread: the MPI library provides thread level {}, headlab needs {} "
        "(MPI_THREAD_SERIALIZED)",
        provided, MPI_THREAD_SERIALIZED);
  auto comm = std::make_unique<MpiComm>();
  the_world = comm.get();
  return comm;
}

void close_world() {
  if (the_world) the_world->stop_answering();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (we_initialised && !finalized) MPI_Finalize();
}

void abort_world(int code) {
  std::fflush(nullptr);
  if (we_initialised) {
    // mpirun forwards a rank's stderr asynchronously and stops forwarding when the abort
    // reaches it: give the error line just printed a moment to get through first.
    if (the_world) {
      the_world->announce_leaving(0.2);
      the_world->stop_answering();
    } else {
      const timespec pause{0, 200'000'000};
      nanosleep(&pause, nullptr);
    }
    MPI_Abort(MPI_COMM_WORLD, code);
  }
  std::_Exit(code);
}

}  // namespace headlab
