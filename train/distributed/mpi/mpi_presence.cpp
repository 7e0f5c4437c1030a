#include "train/distributed/mpi/mpi_presence.h"

#include <time.h>

#include <chrono>
#include <future>
#include <memory>
#include <mutex>

#include <fmt/format.h>

#include "core/error.h"
#include "train/distributed/mpi/mpi_calls.h"

namespace headlab::mpi {
namespace {

// The ranks that did not answer, and whether `rank` is the lowest that did (it alone reports).
struct Attendance {
  std::vector<int> missing;
  bool speaks = false;
};

Attendance attendance(const std::vector<bool>& answered, int rank) {
  Attendance a;
  int lowest = -1;
  for (int q = 0; q < static_cast<int>(answered.size()); ++q) {
    if (!answered[static_cast<size_t>(q)]) a.missing.push_back(q);
    if (answered[static_cast<size_t>(q)] && lowest < 0) lowest = q;
  }
  a.speaks = lowest == rank;
  return a;
}

}  // namespace

RankPresence::RankPresence(MPI_Comm world) {
  MPI_Comm_rank(world, &rank_);
  MPI_Comm_size(world, &size_);
  const int code = MPI_Comm_dup(world, &roll_);
  if (code != MPI_SUCCESS) fail("MPI comm_dup failed: {}", error_text(code));
  MPI_Comm_set_errhandler(roll_, MPI_ERRORS_RETURN);
}

RankPresence::~RankPresence() {
  stop_answering();
}

void RankPresence::start_answering(uint64_t nonce, std::vector<SocketPresence::Address> addresses) {
  sockets_.start(nonce, rank_, std::move(addresses));
  if (size_ > 1 && !answerer_.joinable()) answerer_ = std::thread([this] { answer(); });
}

bool RankPresence::neighbours_answer(double seconds) const {
  if (size_ < 2) return true;
  const int next = (rank_ + 1) % size_, previous = (rank_ + size_ - 1) % size_;
  const std::vector<SocketPresence::Answer> a = sockets_.ask(seconds, {next, previous});
  return a[static_cast<size_t>(next)] == SocketPresence::Answer::kHere &&
         a[static_cast<size_t>(previous)] == SocketPresence::Answer::kHere;
}

void RankPresence::stop_answering() {
  {
    std::lock_guard guard(lock());
    closing_ = true;
  }
  if (answerer_.joinable()) answerer_.join();
}

void RankPresence::announce_leaving(double seconds) {
  sockets_.set_leaving();
  static const unsigned char kBye = 1;  // static: the sends may read it after a return
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
        return MPI_Testall(static_cast<int>(sent.size()), sent.data(), &done, MPI_STATUSES_IGNORE);
      });
    nap();  // the rest of the pause: mpirun forwards the error line meanwhile
  }
}

bool RankPresence::roll_called() const {
  int flag = 0;
  return locked([&] {
           return MPI_Iprobe(MPI_ANY_SOURCE, kRollCallTag, roll_, &flag, MPI_STATUS_IGNORE);
         }) == MPI_SUCCESS &&
         flag != 0;
}

// Every 10 ms, answers the presence calls of other ranks.
void RankPresence::answer() {
  static const unsigned char kHere = 1;  // static: the sends may read it after a return
  for (;;) {
    {
      std::lock_guard guard(lock());
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

// A rank waiting in any call answers within a nap; one that hung, was stopped, died or is
// computing far behind does not. The sends are never waited for: a stopped rank never takes
// them, and the job ends.
void RankPresence::roll_call(const std::string& what, const std::vector<std::string>& hosts,
                             double timeout) const {
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
  Attendance roll = attendance(answered, rank_);
  std::string message = missing_ranks_message(answered, hosts, timeout);
  if (roll.missing.empty()) message += fmt::format(" (rank {} waited for {})", rank_, what);
  throw MissingRankError(message, std::move(roll.missing), roll.speaks);
}

Comm::Presence RankPresence::presence(double seconds) {
  if (use_sockets_) return presence_by_sockets(seconds);
  Comm::Presence p, unknown;
  unknown.known = false;
  static const unsigned char kAsk = 1;
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  {
    std::unique_lock guard(lock(), end);
    if (!guard.owns_lock() || closing_) return unknown;
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
  const auto take = [&](std::unique_lock<std::timed_mutex>& guard) {
    if (!guard.owns_lock() || closing_) return false;
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
      std::unique_lock guard(lock(), end);
      if (!take(guard)) return unknown;
    }
    nap();
  }
  {
    // One look more, however late: an announcement may have come last.
    std::unique_lock guard(lock(),
                           std::chrono::steady_clock::now() + std::chrono::milliseconds(100));
    if (!take(guard)) return unknown;
  }
  Attendance roll = attendance(answered, rank_);
  p.gone = std::move(roll.missing);
  p.speaks = roll.speaks;
  return p;
}

// The check makes an MPI call, which after a lost host may never return (any MPI call of a
// survivor may sit inside Open MPI then), so it runs on a thread of its own, left behind when it
// does not answer in time: this is the SIGTERM of a job that ends, and mpirun's SIGKILL ends it.
bool RankPresence::leaving_announced(std::chrono::milliseconds wait) const {
  auto found = std::make_shared<std::promise<bool>>();
  std::future<bool> answer = found->get_future();
  std::thread([this, found] {
    std::unique_lock guard(lock(), std::chrono::steady_clock::now() + kLeavingCheck);
    int flag = 0;
    const bool announced =
        guard.owns_lock() && !closing_ &&
        MPI_Iprobe(MPI_ANY_SOURCE, kLeavingTag, roll_, &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS &&
        flag != 0;
    found->set_value(announced);
  }).detach();
  return answer.wait_for(wait) == std::future_status::ready && answer.get();
}

// No MPI call but the announcement's check: after a lost host any MPI call of a survivor may
// never return (above). A rank that reported its own error and still runs answers that it is
// leaving; one that has ended already left its announcement on the MPI side.
Comm::Presence RankPresence::presence_by_sockets(double seconds) const {
  Comm::Presence p;
  if (closing_) {
    p.known = false;
    return p;
  }
  const std::vector<SocketPresence::Answer> answers = sockets_.ask(seconds);
  std::vector<bool> here;
  for (const SocketPresence::Answer a : answers) {
    here.push_back(a == SocketPresence::Answer::kHere);
    if (a == SocketPresence::Answer::kLeaving) p.reported = true;
  }
  Attendance roll = attendance(here, rank_);
  p.gone = std::move(roll.missing);
  p.speaks = roll.speaks;
  if (!p.gone.empty() && !p.reported) p.reported = leaving_announced(kLeavingCheck);
  return p;
}

}  // namespace headlab::mpi
