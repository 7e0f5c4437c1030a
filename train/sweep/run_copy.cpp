// Copies of one run directory on several hosts (run_copy.h).

#include "train/sweep/run_copy.h"

#include <fcntl.h>
#include <stdio.h>  // renameat2, RENAME_EXCHANGE

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "train/io/files.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace headlab {

namespace {

// A run directory holds a few checkpoints of a small model: far below this.
constexpr uint64_t kMaxFile = uint64_t{4} << 30;
// run.json grows by one session record per resume.
constexpr uint64_t kMaxRunJson = uint64_t{16} << 20;

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

// The sessions of a run.json text whose "start" is `start`, or null when it is not a run.json
// (then no copy continues it).
const json* sessions_of(const json& doc, std::string& start) {
  if (!doc.is_object()) return nullptr;
  const auto s = doc.find("start"), list = doc.find("sessions");
  if (s == doc.end() || !s->is_string() || list == doc.end() || !list->is_array()) return nullptr;
  start = s->get<std::string>();
  return &*list;
}

// Whether the sessions `first` are the first ones of `all`, and fewer.
bool starts(const json& all, const json& first) {
  if (first.size() >= all.size()) return false;
  for (size_t k = 0; k < first.size(); ++k)
    if (all[k] != first[k]) return false;
  return true;
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

void place_tree(const std::string& packed, const fs::path& dir) {
  const fs::path parent = dir.parent_path().empty() ? fs::path(".") : dir.parent_path();
  const fs::path incoming = parent / fmt::format(".{}.incoming", dir.filename().string());
  std::error_code ec;
  const bool stale = fs::exists(fs::symlink_status(incoming, ec));
  try {
    unpack_tree(packed, incoming);  // refuses a stale one, which is then left alone
  } catch (...) {
    if (!stale) remove_tree(incoming);  // what this call wrote, and only that
    throw;
  }
  if (!fs::exists(fs::symlink_status(dir, ec))) {
    try {
      rename_path(incoming, dir);
    } catch (...) {
      remove_tree(incoming);
      throw;
    }
    fsync_directory(parent);
    return;
  }
  if (::renameat2(AT_FDCWD, incoming.c_str(), AT_FDCWD, dir.c_str(), RENAME_EXCHANGE) != 0) {
    const int err = errno;
    if (err != EINVAL && err != ENOSYS && err != ENOTSUP) {
      remove_tree(incoming);
      fail("cannot put '{}' in place of '{}': {}", incoming.string(), dir.string(),
           std::strerror(err));
    }
    // A filesystem without the exchange: the older copy steps aside first, so `dir` is missing
    // between the two renames (never half written).
    const fs::path older = parent / fmt::format(".{}.older", dir.filename().string());
    try {
      rename_path(dir, older);
    } catch (...) {
      remove_tree(incoming);
      throw;
    }
    rename_path(incoming, dir);
    fsync_directory(parent);
    remove_tree(older);
    return;
  }
  fsync_directory(parent);
  remove_tree(incoming);  // now the older copy
}

std::string run_json_text(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_regular_file(dir / "run.json", ec)) return "";
  return read_file(dir / "run.json", kMaxRunJson);
}

CopyOrder compare_copies(const std::string& a, const std::string& b) {
  if (a == b) return CopyOrder::same;
  if (a.empty()) return CopyOrder::newer;
  if (b.empty()) return CopyOrder::older;
  const json ja = json::parse(a, nullptr, /*allow_exceptions=*/false);
  const json jb = json::parse(b, nullptr, /*allow_exceptions=*/false);
  std::string start_a, start_b;
  const json* sa = sessions_of(ja, start_a);
  const json* sb = sessions_of(jb, start_b);
  if (!sa || !sb || start_a != start_b) return CopyOrder::unrelated;
  if (starts(*sb, *sa)) return CopyOrder::newer;
  if (starts(*sa, *sb)) return CopyOrder::older;
  return CopyOrder::unrelated;
}

}  // namespace headlab
