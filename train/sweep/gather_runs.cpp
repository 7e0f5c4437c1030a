// A distributed sweep's run directories, brought to rank 0's host (gather_runs.h).

#include "train/sweep/gather_runs.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "train/distributed/agree.h"
#include "train/io/files.h"
#include "train/io/sha256.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace headlab {

namespace {

// A run directory holds a few checkpoints of a small model: far below this.
constexpr uint64_t kMaxFile = uint64_t{4} << 30;

void put_u64(std::string& out, uint64_t v) {
  out.append(reinterpret_cast<const char*>(&v), 8);
}

uint64_t get_u64(const std::string& in, size_t& at) {
  if (in.size() - at < 8) fail("a sent run directory is cut short (at byte {})", at);
  uint64_t v;
  std::memcpy(&v, in.data() + at, 8);
  at += 8;
  return v;
}

std::string get_bytes(const std::string& in, size_t& at, uint64_t n) {
  if (in.size() - at < n) fail("a sent run directory is cut short (at byte {})", at);
  std::string s = in.substr(at, n);
  at += n;
  return s;
}

// The run.json of a run directory, hashed ("" when there is none: nothing was trained).
std::string identity(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_regular_file(dir / "run.json", ec)) return "";
  return sha256_file(dir / "run.json");
}

}  // namespace

std::string pack_tree(const fs::path& dir) {
  std::vector<fs::path> entries;
  for (auto it = fs::recursive_directory_iterator(dir); it != fs::recursive_directory_iterator();
       ++it)
    entries.push_back(it->path().lexically_relative(dir));  // fs::relative would follow links
  std::sort(entries.begin(), entries.end());                // parents before their contents
  std::string out;
  for (const fs::path& rel : entries) {
    const fs::path path = dir / rel;
    const fs::file_status st = fs::symlink_status(path);
    char kind;
    std::string data;
    if (fs::is_symlink(st)) {
      kind = 'l';
      data = fs::read_symlink(path).string();
    } else if (fs::is_directory(st)) {
      kind = 'd';
    } else if (fs::is_regular_file(st)) {
      kind = 'f';
      data = read_file(path, kMaxFile);
    } else {
      fail("cannot send '{}' to rank 0: it is not a file, a directory or a symbolic link",
           path.string());
    }
    out.push_back(kind);
    put_u64(out, rel.string().size());
    out += rel.string();
    put_u64(out, data.size());
    out += data;
  }
  return out;
}

void unpack_tree(const std::string& packed, const fs::path& into) {
  std::error_code ec;
  if (fs::exists(fs::symlink_status(into, ec)))
    fail("cannot receive a run directory into '{}': it exists", into.string());
  make_directories(into);
  size_t at = 0;
  while (at < packed.size()) {
    const char kind = packed[at++];
    const fs::path rel = get_bytes(packed, at, get_u64(packed, at));
    const std::string data = get_bytes(packed, at, get_u64(packed, at));
    const bool climbs =
        std::any_of(rel.begin(), rel.end(), [](const fs::path& p) { return p == ".."; });
    if (rel.empty() || rel.is_absolute() || climbs)
      fail("a sent run directory names '{}', outside the directory", rel.string());
    const fs::path path = into / rel;
    if (kind == 'd')
      make_directories(path);
    else if (kind == 'f')
      write_file_durable(path, data);
    else if (kind == 'l')
      fs::create_symlink(data, path);
    else
      fail("a sent run directory has an entry of unknown kind {}", int(kind));
  }
}

int gather_run_dirs(Comm& comm, const std::vector<SweepRun>& runs) {
  const size_t n = static_cast<size_t>(comm.size()), me = static_cast<size_t>(comm.rank());
  if (n == 1) return 0;
  json mine = json::object();
  on_every_rank(comm, [&] {
    for (size_t i = me; i < runs.size(); i += n) mine[std::to_string(i)] = identity(runs[i].dir);
  });
  const std::vector<std::string> told = allgather_strings(comm, mine.dump());

  // Rank 0 decides which runs it lacks: those it does not see, in run order.
  std::vector<size_t> wanted;
  on_root(comm, [&] {
    for (size_t r = 1; r < n; ++r) {
      const json theirs_all = json::parse(told[r]);  // items() refers to it: keep it alive
      for (const auto& [index, id] : theirs_all.items()) {
        const size_t i = std::stoul(index);
        const std::string theirs = id.get<std::string>();
        std::error_code ec;
        if (theirs.empty()) continue;  // nothing trained there to bring
        if (!fs::exists(fs::symlink_status(runs[i].dir, ec))) {
          wanted.push_back(i);
        } else if (identity(runs[i].dir) != theirs) {
          fail(
              "sweep: '{}' on rank 0's host holds another run than the one rank {} trained "
              "there (their run.json differ); move it away, or give the sweep a shared "
              "directory",
              runs[i].dir.string(), r);
        }
      }
    }
    std::sort(wanted.begin(), wanted.end());
  });
  json list = json::array();
  for (size_t i : wanted) list.push_back(i);
  wanted.clear();
  for (const json& i : json::parse(broadcast_string(comm, 0, list.dump())))
    wanted.push_back(i.get<size_t>());

  // Each owner packs its runs first (a directory it cannot read fails on every rank before a
  // byte is sent); then one message pair per run (its size, then its bytes), in run order, which
  // is the order each owner sends its own; rank 0 writes them only once all have arrived, so no
  // sender is left waiting on a rank 0 that failed.
  std::vector<std::string> packed(wanted.size());
  on_every_rank(comm, [&] {
    for (size_t k = 0; k < wanted.size(); ++k)
      if (wanted[k] % n == me) packed[k] = pack_tree(runs[wanted[k]].dir);
  });
  for (size_t k = 0; k < wanted.size(); ++k) {
    const int owner = static_cast<int>(wanted[k] % n);
    uint64_t size = packed[k].size();
    if (comm.rank() == owner) {
      comm.send(0, std::as_bytes(std::span(&size, 1)));
      comm.send(0, std::as_bytes(std::span(packed[k].data(), packed[k].size())));
      packed[k].clear();
    } else if (comm.is_root()) {
      comm.recv(owner, std::as_writable_bytes(std::span(&size, 1)));
      packed[k].assign(size, '\0');
      comm.recv(owner, std::as_writable_bytes(std::span(packed[k].data(), packed[k].size())));
    }
  }
  int received = 0;
  on_root(comm, [&] {
    for (size_t k = 0; k < wanted.size(); ++k) {
      const fs::path dir = runs[wanted[k]].dir;
      const fs::path incoming =
          dir.parent_path() / fmt::format(".{}.incoming", dir.filename().string());
      // A stale `incoming` is not this call's: unpack_tree refuses it, and it is left alone.
      std::error_code ec;
      const bool stale = fs::exists(fs::symlink_status(incoming, ec));
      try {
        unpack_tree(packed[k], incoming);
        rename_path(incoming, dir);
      } catch (...) {
        if (!stale) remove_tree(incoming);  // what this call wrote, and only that
        throw;
      }
      fsync_directory(dir.parent_path());
      ++received;
    }
  });
  return received;
}

}  // namespace headlab
