// The world through Open MPI (train/distributed/world.h). Every call is non-blocking underneath and
// waited for with a deadline (runtime.dist_timeout), so a rank whose peer hung reports it
// instead of waiting forever; a peer that died is noticed by mpirun, which ends the job. A wait
// that runs out takes a roll call on a communicator of its own, so the job's one report names
// the ranks that did not arrive (MissingRankError, train/distributed/comm.h). A thread of the
// comm answers every other rank's "are you there?" (Comm::presence) whatever this rank is doing,
// so that when mpirun ends a job because a rank died, the survivors can tell which one it was.
// Every MPI call, on whichever thread, is made under one lock: MPI_THREAD_SERIALIZED.

#include <mpi.h>

#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "train/distributed/world.h"

namespace headlab {
namespace {

bool we_initialised = false;

// Held for every MPI call after MPI_Init: the job's own (the main thread's, or the gradient
// reducer's chain thread), the answering thread's and a presence call's. Timed: a presence call
// gives up when a call of the job does not return (Open MPI's notice of a peer that hung up on
// TCP waits inside MPI_Test for mpirun, which is busy ending the job).
std::timed_mutex mpi_lock;

template <class F>
int locked(F&& call) {
  std::lock_guard lock(mpi_lock);
  return call();
}

void nap() {
  const timespec pause{0, 1'000'000};  // 1 ms
  nanosleep(&pause, nullptr);
}

std::string error_text(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) return fmt::format("error {}", code);
  return std::string(text, static_cast<size_t>(length));
}

class MpiComm final : public Comm {
 public:
  MpiComm() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);  // errors come back to us
    // The roll call's messages travel apart from the job's, so no receive of the job ever
    // matches one.
    check(MPI_Comm_dup(MPI_COMM_WORLD, &roll_), "comm_dup", -1);
    MPI_Comm_set_errhandler(roll_, MPI_ERRORS_RETURN);
    // Every rank's host name, for the report of a rank that did not arrive (a namespaced
    // host's own UTS name: gethostname, not the address mpirun was given).
    std::string mine(kHostName, '\0');
    if (gethostname(mine.data(), mine.size() - 1) != 0) mine[0] = '?';
    std::string all(kHostName * static_cast<size_t>(size_), '\0');
    allgather(std::as_bytes(std::span(mine)), std::as_writable_bytes(std::span(all)));
    for (int r = 0; r < size_; ++r) hosts_.push_back(all.substr(r * kHostName, kHostName).c_str());
    if (size_ > 1) answerer_ = std::thread([this] { answer(); });
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
  Presence presence(double seconds) override;
  // Before MPI_Finalize or MPI_Abort: no other thread makes an MPI call after this.
  void stop_answering() {
    {
      std::lock_guard lock(mpi_lock);
      closing_ = true;
    }
    if (answerer_.joinable()) answerer_.join();
  }
  // A rank that reported its own error and ends the job (abort_world) tells every other one,
  // so that their presence call, when mpirun's SIGTERM comes, does not report it again as a
  // rank that died. Gives the messages `seconds` to leave.
  void announce_leaving(double seconds) {
    static const unsigned char kBye = 1;
    std::vector<MPI_Request> sent;
    for (int p = 0; p < size_; ++p) {
      MPI_Request s;
      if (p != rank_ && locked([&] {
                          return MPI_Isend(&kBye, 1, MPI_BYTE, p, kLeavingTag, roll_, &s);
                        }) == MPI_SUCCESS)
        sent.push_back(s);
    }
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    int done = sent.empty() ? 1 : 0;
    while (std::chrono::steady_clock::now() < end) {
      if (!done)
        locked([&] {
          return MPI_Testall(static_cast<int>(sent.size()), sent.data(), &done,
                             MPI_STATUSES_IGNORE);
        });
      nap();  // the rest of the pause: mpirun forwards the error line meanwhile
    }
  }

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
  static constexpr int kRollCallTag = 7;
  // The presence call's question and answer, and the announcement of a rank that leaves.
  static constexpr int kAskTag = 8, kHereTag = 9, kLeavingTag = 10;

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
        if (roll_called()) roll_call(what);
      } else if (patient) {
        sched_yield();
      }
      if (!patient && tests % 256 != 0) continue;  // a look at the clock per yield, else per 256
      const Clock::time_point now = Clock::now();
      const double step = std::chrono::duration<double>(now - last).count();
      last = now;
      if (step < 1.0) waited += step;
      if (waited > timeout_) roll_call(what);
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

  // Whether another rank has called the roll (its message waits on roll_).
  bool roll_called() const {
    int flag = 0;
    return locked([&] {
             return MPI_Iprobe(MPI_ANY_SOURCE, kRollCallTag, roll_, &flag, MPI_STATUS_IGNORE);
           }) == MPI_SUCCESS &&
           flag != 0;
  }

  // The answering thread: every 10 ms, answers the presence calls of other ranks.
  void answer() {
    static const unsigned char kHere = 1;  // static: the sends may read it after a return
    for (;;) {
      {
        std::lock_guard lock(mpi_lock);
        if (closing_) return;
        for (;;) {
          int flag = 0;
          MPI_Status status;
          if (MPI_Iprobe(MPI_ANY_SOURCE, kAskTag, roll_, &flag, &status) != MPI_SUCCESS || !flag)
            break;
          unsigned char byte = 0;
          MPI_Recv(&byte, 1, MPI_BYTE, status.MPI_SOURCE, kAskTag, roll_, MPI_STATUS_IGNORE);
          MPI_Request s;
          if (MPI_Isend(&kHere, 1, MPI_BYTE, status.MPI_SOURCE, kHereTag, roll_, &s) == MPI_SUCCESS)
            MPI_Request_free(&s);
        }
      }
      const timespec pause{0, 10'000'000};  // 10 ms
      nanosleep(&pause, nullptr);
    }
  }

  // The roll call of a job that waited too long, taken by every rank that is waiting: this rank
  // tells every other one it is here, then listens for kRollCallSeconds (a rank waiting in any
  // call answers within a nap; one that hung, was stopped, died or is computing far behind does
  // not), and throws MissingRankError naming those that did not answer. The sends are never
  // waited for: a stopped rank never takes them, and the job ends. `what` this rank waited for
  // goes into the message of a deadlock (every rank answered).
  [[noreturn]] void roll_call(const std::string& what) {
    static const unsigned char kHere = 1;  // static: the sends may read it after we return
    for (int p = 0; p < size_; ++p) {
      MPI_Request s;
      if (p != rank_)
        locked([&] {
          const int code = MPI_Isend(&kHere, 1, MPI_BYTE, p, kRollCallTag, roll_, &s);
          return code == MPI_SUCCESS ? MPI_Request_free(&s) : code;
        });
    }
    std::vector<bool> answered(static_cast<size_t>(size_), false);
    answered[static_cast<size_t>(rank_)] = true;
    int count = 1;
    const auto end =
        std::chrono::steady_clock::now() + std::chrono::duration<double>(kRollCallSeconds);
    while (count < size_ && std::chrono::steady_clock::now() < end) {
      int flag = 0;
      MPI_Status status;
      unsigned char byte = 0;
      const int code = locked([&] {
        const int probe = MPI_Iprobe(MPI_ANY_SOURCE, kRollCallTag, roll_, &flag, &status);
        if (probe == MPI_SUCCESS && flag)
          MPI_Recv(&byte, 1, MPI_BYTE, status.MPI_SOURCE, kRollCallTag, roll_, MPI_STATUS_IGNORE);
        return probe;
      });
      if (code != MPI_SUCCESS) break;
      if (!flag) {
        nap();
        continue;
      }
      if (!answered[static_cast<size_t>(status.MPI_SOURCE)]) ++count;
      answered[static_cast<size_t>(status.MPI_SOURCE)] = true;
    }
    std::vector<int> missing;
    int lowest = -1;
    for (int p = 0; p < size_; ++p) {
      if (!answered[static_cast<size_t>(p)]) missing.push_back(p);
      if (answered[static_cast<size_t>(p)] && lowest < 0) lowest = p;
    }
    std::string message = missing_ranks_message(answered, hosts_, timeout_);
    if (missing.empty()) message += fmt::format(" (rank {} waited for {})", rank_, what);
    throw MissingRankError(message, std::move(missing), lowest == rank_);
  }

  // How long a wait yields before it sleeps: longer than the steps of the models headlab
  // trains take to drift apart, so ranks in step never sleep.
  static constexpr double kYieldSeconds = 0.05;
  // How long a roll call listens: ranks that wait answer within a nap, but a rank about to
  // reach its wait (it finishes a step first) and a busy machine's scheduler need longer.
  static constexpr double kRollCallSeconds = 2.0;
  int rank_ = 0, size_ = 1;
  MPI_Comm roll_ = MPI_COMM_NULL;
  std::atomic<bool> interrupted_{false};
  bool closing_ = false;  // guarded by mpi_lock: MPI is being finalized or aborted
  std::thread answerer_;
  std::vector<std::string> hosts_;  // by rank
  double timeout_ = kDefaultPeerTimeout;
};

Comm::Presence MpiComm::presence(double seconds) {
  Presence p, unknown;
  unknown.known = false;
  static const unsigned char kAsk = 1;
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  {
    std::unique_lock lock(mpi_lock, end);
    if (!lock.owns_lock() || closing_) return unknown;
    for (int q = 0; q < size_; ++q) {
      MPI_Request s;
      if (q != rank_ && MPI_Isend(&kAsk, 1, MPI_BYTE, q, kAskTag, roll_, &s) == MPI_SUCCESS)
        MPI_Request_free(&s);
    }
  }
  std::vector<bool> answered(static_cast<size_t>(size_), false);
  answered[static_cast<size_t>(rank_)] = true;
  int count = 1;
  // Takes the answers (and the announcements of a rank that reported its own error) that came.
  const auto take = [&](std::unique_lock<std::timed_mutex>& lock) {
    if (!lock.owns_lock() || closing_) return false;
    for (const int tag : {kHereTag, kLeavingTag}) {
      for (;;) {
        int flag = 0;
        MPI_Status status;
        if (MPI_Iprobe(MPI_ANY_SOURCE, tag, roll_, &flag, &status) != MPI_SUCCESS || !flag) break;
        unsigned char byte = 0;
        MPI_Recv(&byte, 1, MPI_BYTE, status.MPI_SOURCE, tag, roll_, MPI_STATUS_IGNORE);
        if (tag == kLeavingTag) {
          p.reported = true;
          continue;
        }
        if (!answered[static_cast<size_t>(status.MPI_SOURCE)]) ++count;
        answered[static_cast<size_t>(status.MPI_SOURCE)] = true;
      }
    }
    return true;
  };
  while (count < size_ && std::chrono::steady_clock::now() < end) {
    {
      std::unique_lock lock(mpi_lock, end);
      if (!take(lock)) return unknown;
    }
    nap();
  }
  {
    // One look more, however late: an announcement may have come last.
    std::unique_lock lock(mpi_lock,
                          std::chrono::steady_clock::now() + std::chrono::milliseconds(100));
    if (!take(lock)) return unknown;
  }
  int lowest = -1;
  for (int q = 0; q < size_; ++q) {
    if (!answered[static_cast<size_t>(q)]) p.gone.push_back(q);
    if (answered[static_cast<size_t>(q)] && lowest < 0) lowest = q;
  }
  p.speaks = lowest == rank_;
  return p;
}

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
