#include "train/io/json.h"

#include <cerrno>
#include <system_error>

#include <sys/stat.h>

#include "core/error.h"
#include "train/io/files.h"

namespace headlab {

using nlohmann::json;

json parse_json(std::string_view text, const std::string& name, bool require_object) {
  const auto depth_limit = [&](int depth, json::parse_event_t, json&) {
    if (depth > kMaxJsonDepth) fail("{}: nests deeper than {} levels", name, kMaxJsonDepth);
    return true;
  };
  json doc;
  try {
    doc = json::parse(text.begin(), text.end(), depth_limit);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number like 1e400
    std::string what = e.what();
    // Drop nlohmann's "[json.exception.parse_error.101] " tag.
    if (const auto at = what.find("] "); what.rfind("[json.exception", 0) == 0 && at != what.npos)
      what = what.substr(at + 2);
    fail("{}: not valid JSON: {}", name, what);
  }
  if (require_object && !doc.is_object())
    fail("{}: expected a JSON object, got {}", name, doc.type_name());
  return doc;
}

json read_json_file(const std::filesystem::path& path, uint64_t max_bytes, bool require_object) {
  return parse_json(read_file(path, max_bytes), path.string(), require_object);
}

std::optional<json> read_json_file_if_present(const std::filesystem::path& path,
                                              uint64_t max_bytes) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 && errno == ENOENT) return std::nullopt;
  return read_json_file(path, max_bytes);
}

void for_each_jsonl_row(const std::filesystem::path& path, uint64_t max_bytes,
                        const std::function<void(std::string_view, const json&)>& visit) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 && errno == ENOENT) return;
  const std::string text = read_file(path, max_bytes);
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    const std::string_view line(text.data() + begin, end - begin);
    begin = end + 1;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    json row;
    try {
      row = parse_json(line, path.string());
    } catch (const Error&) {
      continue;
    }
    visit(line, row);
  }
}

std::vector<json> read_jsonl(const std::filesystem::path& path, uint64_t max_bytes) {
  std::vector<json> rows;
  for_each_jsonl_row(path, max_bytes,
                     [&](std::string_view, const json& row) { rows.push_back(row); });
  return rows;
}

}  // namespace headlab
