#include "train/distributed/agree.h"

#include <exception>
#include <sstream>
#include <vector>

namespace headlab {
namespace {

// "" when f succeeded, else its message (what() of any std::exception).
std::string outcome_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    const std::string what = e.what();
    return what.empty() ? std::string("unknown error") : what;
  } catch (...) {
    return "unknown exception";
  }
  return "";
}

std::string first_difference(const std::string& a, const std::string& b) {
  std::istringstream sa(a), sb(b);
  std::string la, lb;
  while (true) {
    const bool ga = static_cast<bool>(std::getline(sa, la));
    const bool gb = static_cast<bool>(std::getline(sb, lb));
    if (!ga && !gb) return "(same lines, different bytes)";
    if (!ga) la = "(end)";
    if (!gb) lb = "(end)";
    if (la != lb || !ga || !gb) return "'" + lb + "' here, '" + la + "' on rank 0";
  }
}

}  // namespace

void on_root(Comm& comm, const std::function<void()>& f) {
  if (comm.size() == 1) return f();
  std::string error = comm.is_root() ? outcome_of(f) : std::string();
  error = broadcast_string(comm, 0, std::move(error));
  if (!error.empty()) throw CollectiveError(error);
}

void on_every_rank(Comm& comm, const std::function<void()>& f) {
  if (comm.size() == 1) return f();
  const std::vector<std::string> errors = allgather_strings(comm, outcome_of(f));
  int first = -1;
  bool same = true;
  for (int r = 0; r < comm.size(); ++r) {
    if (errors[r].empty()) {
      same = false;
      continue;
    }
    if (first < 0) first = r;
    same = same && errors[r] == errors[first];
  }
  if (first < 0) return;
  throw CollectiveError(same ? errors[first] : fmt::format("rank {}: {}", first, errors[first]));
}

bool any_rank(Comm& comm, bool flag) {
  if (comm.size() == 1) return flag;
  std::vector<unsigned char> all(static_cast<size_t>(comm.size()));
  const unsigned char mine = flag ? 1 : 0;
  comm.allgather(std::as_bytes(std::span(&mine, 1)), std::as_writable_bytes(std::span(all)));
  for (unsigned char v : all)
    if (v) return true;
  return false;
}

void check_same_on_every_rank(Comm& comm, const std::string& what, const std::string& text) {
  if (comm.size() == 1) return;
  const std::vector<std::string> all = allgather_strings(comm, text);
  for (int r = 1; r < comm.size(); ++r)
    if (all[r] != all[0])
      throw CollectiveError(fmt::format("rank {} differs from rank 0 in {}: {}", r, what,
                                        first_difference(all[0], all[r])));
}

}  // namespace headlab
