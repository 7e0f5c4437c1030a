#pragma once
// ThreadComm: a Comm whose ranks are threads of one process, for testing what runs over ranks
// (the reduction order, the string helpers) without MPI. run_ranks(n, f) runs f(comm) on n
// threads, one rank each, and rethrows the first exception.

#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "train/distributed/comm.h"

namespace headlab::testing {

// The mailboxes of n ranks: one FIFO of messages per (from, to).
class Mailboxes {
 public:
  // Throws CommInterrupted once rank `from` was interrupted, as MpiComm does.
  void put(int from, int to, std::vector<std::byte> message) {
    {
      std::lock_guard lock(mutex_);
      if (interrupted_.count(from) > 0) throw CommInterrupted();
      boxes_[{from, to}].push_back(std::move(message));
    }
    ready_.notify_all();
  }
  // Throws CommInterrupted once rank `to` was interrupted: at once, or ending the wait.
  std::vector<std::byte> take(int from, int to) {
    std::unique_lock lock(mutex_);
    auto& box = boxes_[{from, to}];
    const auto interrupted = [&] { return interrupted_.count(to) > 0; };
    if (interrupted()) throw CommInterrupted();
    if (box.empty()) {
      ++blocked_[to];
      ready_.notify_all();  // for wait_until_blocked
      ready_.wait(lock, [&] { return !box.empty() || interrupted(); });
      --blocked_[to];
      if (interrupted()) {
        ++ended_by_interrupt_[to];
        throw CommInterrupted();
      }
    }
    std::vector<std::byte> m = std::move(box.front());
    box.pop_front();
    return m;
  }
  void interrupt(int rank) {
    {
      std::lock_guard lock(mutex_);
      interrupted_.insert(rank);
    }
    ready_.notify_all();
  }
  // For tests of interrupt: until a receive of rank `to` waits for a message that is not there.
  void wait_until_blocked(int to) {
    std::unique_lock lock(mutex_);
    ready_.wait(lock, [&] { return blocked_[to] > 0; });
  }
  // How many of rank `to`'s receives were waiting when an interrupt ended them.
  int ended_by_interrupt(int to) {
    std::lock_guard lock(mutex_);
    return ended_by_interrupt_[to];
  }

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::map<std::pair<int, int>, std::deque<std::vector<std::byte>>> boxes_;
  std::set<int> interrupted_;                        // ranks whose calls throw (Comm::interrupt)
  std::map<int, int> blocked_, ended_by_interrupt_;  // by receiving rank
};

class ThreadComm final : public Comm {
 public:
  ThreadComm(Mailboxes& boxes, int rank, int size) : boxes_(boxes), rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string describe() const override { return "threads"; }
  void set_timeout(double) override {}
  void interrupt() override { boxes_.interrupt(rank_); }
  void send(int to, std::span<const std::byte> data) override {
    boxes_.put(rank_, to, std::vector<std::byte>(data.begin(), data.end()));
  }
  void recv(int from, std::span<std::byte> data) override {
    const std::vector<std::byte> m = boxes_.take(from, rank_);
    if (m.size() != data.size()) throw std::runtime_error("ThreadComm: message size differs");
    if (!m.empty()) std::memcpy(data.data(), m.data(), m.size());  // an empty span may be null
  }
  void broadcast(int root, std::span<std::byte> data) override {
    if (rank_ == root) {
      for (int r = 0; r < size_; ++r)
        if (r != root) send(r, data);
    } else {
      recv(root, data);
    }
  }
  void allgather(std::span<const std::byte> mine, std::span<std::byte> all) override {
    for (int r = 0; r < size_; ++r)
      if (r != rank_) send(r, mine);
    for (int r = 0; r < size_; ++r) {
      const std::span<std::byte> part = all.subspan(r * mine.size(), mine.size());
      if (r == rank_ && !mine.empty())
        std::memcpy(part.data(), mine.data(), mine.size());
      else if (r != rank_)
        recv(r, part);
    }
  }

 private:
  Mailboxes& boxes_;
  int rank_, size_;
};

// `boxes` given: the test can look at the ranks' mailboxes while they run.
inline void run_ranks(int n, Mailboxes& boxes, const std::function<void(Comm&)>& f) {
  std::vector<std::exception_ptr> errors(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      ThreadComm comm(boxes, r, n);
      try {
        f(comm);
      } catch (...) {
        errors[static_cast<size_t>(r)] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

inline void run_ranks(int n, const std::function<void(Comm&)>& f) {
  Mailboxes boxes;
  run_ranks(n, boxes, f);
}

}  // namespace headlab::testing
