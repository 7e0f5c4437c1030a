// Several hosts on this machine as namespaces (tests/distributed/fake_hosts.h).

#include "tests/distributed/fake_hosts.h"

#include <unistd.h>

#include <atomic>
#include <fstream>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace fs = std::filesystem;

namespace headlab::testing {

namespace {

RunResult shell(const std::string& command) {
  RunOptions o;
  o.program = "/bin/sh";
  o.timeout_seconds = 60;
  return run_cli({"-c", command}, o);
}

const char* const kNetworks[] = {"data", "other"};

}  // namespace

std::string FakeHosts::unavailable() {
  if (::geteuid() != 0) return "not root: network and mount namespaces need root";
  const RunResult r = shell(
      "command -v ip >/dev/null && command -v unshare >/dev/null && "
      "unshare --net --mount --uts true");
  if (r.exit_code != 0)
    return "cannot make network, mount and UTS namespaces here (`unshare --net --mount --uts "
           "true` failed, or ip/unshare are missing): " +
           r.err;
  return "";
}

FakeHosts::FakeHosts(const fs::path& root, int count) : root_(root), count_(count) {
  static std::atomic<int> made{0};
  tag_ = fmt::format("{}{}", ::getpid() % 1000000, made++);
  fs::create_directories(shared_path());
  made_.push_back("hl" + tag_ + "sw");
  sh(fmt::format("ip netns add {0} && ip -n {0} link set lo up", made_.back()));
  const std::string sw = made_.back();
  for (int n = 0; n < 2; ++n)
    sh(fmt::format("ip -n {0} link add br{1} type bridge && ip -n {0} link set br{1} up", sw, n));
  for (int h = 0; h < count; ++h) {
    fs::create_directories(private_dir(h));
    made_.push_back(ns(h));
    sh(fmt::format("ip netns add {0} && ip -n {0} link set lo up", ns(h)));
    for (int n = 0; n < 2; ++n) {
      // A veth pair: one end in the host (named data/other there), the other on the bridge.
      const std::string inside = link(h, kNetworks[n]), outside = inside + "p";
      sh(
          fmt::format("ip link add {0} type veth peer name {1} && ip link set {0} netns {2} && "
                      "ip link set {1} netns {3} && ip -n {3} link set {1} master br{4} && "
                      "ip -n {3} link set {1} up && ip -n {2} link set {0} name {5} && "
                      "ip -n {2} addr add 10.99.{6}.{7}/24 dev {5} && ip -n {2} link set {5} up",
                      inside, outside, ns(h), sw, n, kNetworks[n], n + 1, h + 1));
    }
  }
}

FakeHosts::~FakeHosts() {
  // Deleting a namespace deletes its links; processes left in one (none after mpirun ends)
  // would keep it alive unnamed, never reachable from outside.
  for (const std::string& n : made_) shell("ip netns delete " + n);
}

std::string FakeHosts::address(int host) const {
  return fmt::format("10.99.1.{}", host + 1);
}
std::string FakeHosts::name(int host) const {
  return fmt::format("host{}", char('A' + host));
}
fs::path FakeHosts::private_dir(int host) const {
  return root_ / "hosts" / name(host);
}
std::string FakeHosts::ns(int host) const {
  return fmt::format("hl{}{}", tag_, char('a' + host));
}
std::string FakeHosts::link(int host, const char* network) const {
  return fmt::format("hl{}{}{}", tag_, char('a' + host), network[0]);
}

void FakeHosts::sh(const std::string& command) const {
  const RunResult r = shell(command);
  if (r.exit_code != 0) throw std::runtime_error("fake hosts: " + command + ": " + r.err);
}

RunResult FakeHosts::mpirun(int slots, const std::vector<std::string>& args,
                            RunOptions options) const {
  const fs::path hostfile = root_ / "hostfile";
  std::string table;
  {
    std::ofstream out(hostfile);
    for (int h = 0; h < count_; ++h) {
      out << address(h) << " slots=" << slots << "\n";
      table += fmt::format("{}{}={}={}={}", h ? ";" : "", address(h), ns(h), name(h),
                           private_dir(h).string());
    }
  }
  const std::string agent = (source_dir() / "tests" / "distributed" / "netns_agent.sh").string();
  // mpirun itself runs on host 0, entered the way the agent enters every host.
  std::vector<std::string> line = {
      "--keep-env",      address(0), options.program.string(), "--hostfile",
      hostfile.string(), "--mca",    "plm_rsh_agent",          agent};
  line.insert(line.end(), args.begin(), args.end());
  options.program = agent;
  options.env.push_back("HEADLAB_FAKE_HOSTS=" + table);
  options.env.push_back("HEADLAB_FAKE_MOUNT=" + shared_path().string());
  return run_cli(line, options);
}

void FakeHosts::kill_host(int host) const {
  shell(fmt::format("ip netns pids {} | xargs -r kill -KILL", ns(host)));
}

uint64_t FakeHosts::bytes_sent(int host, const char* network) const {
  const RunResult r = shell(fmt::format("ip -n {} -s -j link show dev {}", ns(host), network));
  if (r.exit_code != 0) throw std::runtime_error("fake hosts: ip link show: " + r.err);
  return nlohmann::json::parse(r.out).at(0).at("stats64").at("tx").at("bytes").get<uint64_t>();
}

uint64_t FakeHosts::data_bytes_sent(int host) const {
  return bytes_sent(host, "data");
}
uint64_t FakeHosts::other_bytes_sent(int host) const {
  return bytes_sent(host, "other");
}

}  // namespace headlab::testing
