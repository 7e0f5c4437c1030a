#include "train/distributed/mpi/socket_presence.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

namespace headlab::mpi {
namespace {

constexpr size_t kAnswerBytes = sizeof(uint64_t) + sizeof(int32_t) + 1;  // nonce, rank, state

void put_answer(unsigned char* out, uint64_t nonce, int32_t rank, SocketPresence::Answer state) {
  std::memcpy(out, &nonce, sizeof nonce);
  std::memcpy(out + sizeof nonce, &rank, sizeof rank);
  out[sizeof nonce + sizeof rank] = static_cast<unsigned char>(state);
}

// The host's IPv4 addresses that are up, loopback only when there is no other.
void host_addresses(SocketPresence::Address& a) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) == 0) {
    for (const ifaddrs* i = list; i && a.count < SocketPresence::kAddresses; i = i->ifa_next)
      if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && (i->ifa_flags & IFF_UP) &&
          !(i->ifa_flags & IFF_LOOPBACK))
        a.ip[a.count++] = reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr;
    freeifaddrs(list);
  }
  if (a.count == 0) a.ip[a.count++] = htonl(INADDR_LOOPBACK);
}

}  // namespace

SocketPresence::SocketPresence() {
  // CLOEXEC: a sweep's children must not inherit the port.
  listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (listener_ < 0) return;
  sockaddr_in any{};
  any.sin_family = AF_INET;
  any.sin_addr.s_addr = htonl(INADDR_ANY);
  any.sin_port = 0;  // an ephemeral port
  socklen_t length = sizeof any;
  if (::bind(listener_, reinterpret_cast<const sockaddr*>(&any), sizeof any) != 0 ||
      ::listen(listener_, 64) != 0 ||
      ::getsockname(listener_, reinterpret_cast<sockaddr*>(&any), &length) != 0) {
    ::close(listener_);
    listener_ = -1;
    return;
  }
  mine_.port = any.sin_port;
  host_addresses(mine_);
}

SocketPresence::~SocketPresence() {
  stop_.store(true);
  if (answerer_.joinable()) answerer_.join();
  if (listener_ >= 0) ::close(listener_);
}

void SocketPresence::start(uint64_t nonce, int rank, std::vector<Address> peers) {
  nonce_ = nonce;
  rank_ = rank;
  peers_ = std::move(peers);
  if (listener_ >= 0 && peers_.size() > 1) answerer_ = std::thread([this] { answer_loop(); });
}

// Every 10 ms at most: answers every connection that came.
void SocketPresence::answer_loop() {
  while (!stop_.load()) {
    pollfd wait{listener_, POLLIN, 0};
    if (::poll(&wait, 1, 10) <= 0) continue;
    unsigned char reply[kAnswerBytes];
    put_answer(reply, nonce_, static_cast<int32_t>(rank_),
               leaving_.load() ? Answer::kLeaving : Answer::kHere);
    for (;;) {
      const int fd = ::accept4(listener_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        // None left (EAGAIN), or an error (no file descriptor free): a pause before the next
        // look, so that a connection left waiting does not keep the loop spinning.
        if (errno != EAGAIN && errno != EWOULDBLOCK) ::poll(nullptr, 0, 10);
        break;
      }
      // 13 bytes into a fresh socket's empty buffer: never partial, never blocking.
      [[maybe_unused]] const ssize_t sent = ::send(fd, reply, sizeof reply, MSG_NOSIGNAL);
      ::close(fd);
    }
  }
}

std::vector<SocketPresence::Answer> SocketPresence::ask(double seconds,
                                                        const std::vector<int>& ranks) const {
  const int n = static_cast<int>(peers_.size());
  std::vector<Answer> answered(static_cast<size_t>(n), Answer::kSilent);
  if (rank_ < n) answered[static_cast<size_t>(rank_)] = Answer::kHere;
  std::vector<bool> asked(static_cast<size_t>(n), ranks.empty());
  for (const int q : ranks)
    if (q >= 0 && q < n) asked[static_cast<size_t>(q)] = true;
  // One connection per (rank, address), all at once: a dead host then costs the deadline once,
  // not once per rank.
  struct Attempt {
    int rank = 0;
    bool connected = false;
    unsigned char got[kAnswerBytes] = {};
    size_t bytes = 0;
  };
  std::vector<Attempt> attempts;
  std::vector<pollfd> fds;
  for (int q = 0; q < n; ++q) {
    const Address& a = peers_[static_cast<size_t>(q)];
    for (int i = 0; q != rank_ && asked[static_cast<size_t>(q)] && i < a.count; ++i) {
      const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      if (fd < 0) continue;
      sockaddr_in to{};
      to.sin_family = AF_INET;
      to.sin_addr.s_addr = a.ip[i];
      to.sin_port = a.port;
      const int code = ::connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof to);
      if (code != 0 && errno != EINPROGRESS) {
        ::close(fd);
        continue;
      }
      attempts.push_back({q, code == 0});
      fds.push_back({fd, static_cast<short>(code == 0 ? POLLIN : POLLOUT), 0});
    }
  }
  unsigned char expected[kAnswerBytes];
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  size_t open = fds.size();
  while (open > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          end - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0 || ::poll(fds.data(), fds.size(), static_cast<int>(left)) <= 0) break;
    for (size_t k = 0; k < fds.size(); ++k) {
      pollfd& p = fds[k];
      Attempt& t = attempts[k];
      if (p.fd < 0 || p.revents == 0) continue;
      bool finished = answered[static_cast<size_t>(t.rank)] != Answer::kSilent;
      if (!finished && !t.connected) {
        int error = 0;
        socklen_t size = sizeof error;
        finished = ::getsockopt(p.fd, SOL_SOCKET, SO_ERROR, &error, &size) != 0 || error != 0;
        t.connected = !finished;
        p.events = POLLIN;
      } else if (!finished) {
        const ssize_t r = ::recv(p.fd, t.got + t.bytes, kAnswerBytes - t.bytes, 0);
        if (r > 0) t.bytes += static_cast<size_t>(r);
        const bool again = r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR);
        finished = r == 0 || (r < 0 && !again) || t.bytes == kAnswerBytes;
        put_answer(expected, nonce_, static_cast<int32_t>(t.rank), Answer::kHere);
        const size_t state = kAnswerBytes - 1;
        if (t.bytes == kAnswerBytes && std::memcmp(t.got, expected, state) == 0 &&
            (t.got[state] == static_cast<unsigned char>(Answer::kHere) ||
             t.got[state] == static_cast<unsigned char>(Answer::kLeaving)))
          answered[static_cast<size_t>(t.rank)] = static_cast<Answer>(t.got[state]);
      }
      p.revents = 0;
      if (finished) {
        ::close(p.fd);
        p.fd = -1;  // poll skips it
        --open;
      }
    }
  }
  for (const pollfd& p : fds)
    if (p.fd >= 0) ::close(p.fd);
  return answered;
}

}  // namespace headlab::mpi
