#pragma once
// Several hosts on this machine, for the multi-host tests ("dist: hosts: ..."): each host is a
// network namespace with its own addresses, its own host name (a UTS namespace) and its own
// private directory seen at one shared path (a mount namespace), so a run directory written on
// one host is invisible on the others, as without a shared filesystem. The hosts meet on two
// networks, each a bridge in a switch namespace: "data" (10.99.1.0/24), the one the documented
// settings choose, and "other" (10.99.2.0/24), which must stay quiet. Open MPI starts its
// daemons on them through tests/distributed/netns_agent.sh in place of ssh. Traffic never
// leaves the namespaces made here; destroying the hosts removes them.
//
// Needs root (or CAP_SYS_ADMIN and CAP_NET_ADMIN), iproute2's `ip` and util-linux's `unshare`;
// FakeHosts::unavailable() says why not where they are missing, and the tests skip.

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/reliability/process.h"

namespace headlab::testing {

class FakeHosts {
 public:
  // "" when namespaces can be made here; else the reason, for the skip message.
  static std::string unavailable();

  // `count` hosts, their private directories under `root`/hosts. Throws std::runtime_error
  // with the failing command's output when a namespace or link cannot be made.
  FakeHosts(const std::filesystem::path& root, int count);
  ~FakeHosts();
  FakeHosts(const FakeHosts&) = delete;
  FakeHosts& operator=(const FakeHosts&) = delete;

  int count() const { return count_; }
  std::string address(int host) const;  // on the data network: 10.99.1.(host + 1)
  std::string name(int host) const;     // its host name: hostA, hostB, ...
  // The path at which every host sees its own private directory, and host h's directory as
  // the test (outside every host) sees it.
  std::filesystem::path shared_path() const { return root_ / "host"; }
  std::filesystem::path private_dir(int host) const;
  // The data network, for btl_tcp_if_include / oob_tcp_if_include.
  static std::string data_network() { return "10.99.1.0/24"; }

  // `mpirun ARGS` started on host 0 with a hostfile of every host (`slots` each) and the agent;
  // ARGS are mpirun's options and the command. The interface settings are not added here: the
  // tests pass the documented ones (docs/distributed.md) themselves.
  RunResult mpirun(int slots, const std::vector<std::string>& args, RunOptions options) const;

  // SIGKILL to every process of host h at once (its daemon and its ranks): a host that died.
  void kill_host(int host) const;

  // Bytes host h has sent on its data and other links so far.
  uint64_t data_bytes_sent(int host) const;
  uint64_t other_bytes_sent(int host) const;

 private:
  std::string ns(int host) const;
  std::string link(int host, const char* network) const;
  void sh(const std::string& command) const;  // throws with its output when it fails
  uint64_t bytes_sent(int host, const char* network) const;

  std::filesystem::path root_;
  int count_ = 0;
  std::string tag_;                // unique per object: namespaces of parallel tests never collide
  std::vector<std::string> made_;  // namespaces to delete
};

}  // namespace headlab::testing
