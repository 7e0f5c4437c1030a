#include "train/distributed/comm.h"

#include <algorithm>
#include <cstring>
#include <set>

#include "core/error.h"

namespace headlab {

void LocalComm::send(int to, std::span<const std::byte>) {
  throw InternalError(fmt::format("comm: send to rank {} in a process that runs alone", to));
}

void LocalComm::recv(int from, std::span<std::byte>) {
  throw InternalError(fmt::format("comm: recv from rank {} in a process that runs alone", from));
}

void LocalComm::allgather(std::span<const std::byte> mine, std::span<std::byte> all) {
  HEADLAB_ASSERT(all.size() == mine.size());
  if (!mine.empty()) std::memcpy(all.data(), mine.data(), mine.size());
}

std::vector<std::string> allgather_strings(Comm& comm, const std::string& mine) {
  const int n = comm.size();
  std::vector<uint64_t> sizes(static_cast<size_t>(n));
  const uint64_t my_size = mine.size();
  comm.allgather(std::as_bytes(std::span(&my_size, 1)), bytes_of(std::span(sizes)));
  uint64_t longest = 0;
  for (uint64_t s : sizes) longest = std::max(longest, s);
  // Padded to the longest, so one fixed-size allgather carries them all.
  std::string padded = mine;
  padded.resize(longest);
  std::string all(longest * static_cast<size_t>(n), '\0');
  comm.allgather(std::as_bytes(std::span(padded)), std::as_writable_bytes(std::span(all)));
  std::vector<std::string> out;
  for (int r = 0; r < n; ++r) out.push_back(all.substr(r * longest, sizes[r]));
  return out;
}

std::string ranks_text(const std::vector<int>& ranks, const std::vector<std::string>& hosts,
                       bool always_hosts) {
  const bool several_hosts =
      always_hosts || std::set<std::string>(hosts.begin(), hosts.end()).size() > 1;
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i > 0) text += i + 1 == ranks.size() ? " and " : ", ";
    text += std::to_string(ranks[i]);
    const size_t r = static_cast<size_t>(ranks[i]);
    if (several_hosts && r < hosts.size()) text += " on " + hosts[r];
  }
  return text;
}

std::string missing_ranks_message(const std::vector<bool>& answered,
                                  const std::vector<std::string>& hosts, double timeout) {
  std::vector<int> here, missing;
  for (size_t r = 0; r < answered.size(); ++r)
    (answered[r] ? here : missing).push_back(static_cast<int>(r));
  if (missing.empty())
    return fmt::format(
        "every rank waited {:.0f} s (runtime.dist_timeout) for another: the ranks' calls do not "
        "match (a deadlock)",
        timeout);
  const bool one = missing.size() == 1;
  return fmt::format(
      "{} did not arrive in {:.0f} s (runtime.dist_timeout): {} waited for {}; {} hung, {} "
      "stopped or {} far behind",
      ranks_text(missing, hosts), timeout, ranks_text(here, hosts), one ? "it" : "them",
      one ? "it" : "they", one ? "was" : "were", one ? "is" : "are");
}

std::string gone_ranks_message(const std::vector<int>& gone, int ranks,
                               const std::vector<std::string>& hosts) {
  std::vector<int> here;
  for (int r = 0; r < ranks; ++r)
    if (std::find(gone.begin(), gone.end(), r) == gone.end()) here.push_back(r);
  const auto text = [&](const std::vector<int>& r) { return ranks_text(r, hosts, true); };
  return fmt::format(
      "{} ended during the run (killed, crashed, or {} host went down); {} {} still there, and "
      "the launcher ends the job",
      text(gone), gone.size() == 1 ? "its" : "their", text(here), here.size() == 1 ? "is" : "are");
}

std::string broadcast_string(Comm& comm, int root, std::string text) {
  uint64_t size = text.size();
  comm.broadcast(root, std::as_writable_bytes(std::span(&size, 1)));
  text.resize(size);
  comm.broadcast(root, std::as_writable_bytes(std::span(text)));
  return text;
}

}  // namespace headlab
