#include "train/run/run_json.h"

#include "core/error.h"
#include "train/io/files.h"
#include "train/io/json.h"

namespace headlab {
namespace {

using nlohmann::json;

// run.json is small: a few lines per plugin.
constexpr uint64_t kMaxRunJsonBytes = uint64_t{1} << 20;

const char* type_article(const json& v) {
  switch (v.type()) {
    case json::value_t::string:
      return "a string";
    case json::value_t::array:
      return "an array";
    case json::value_t::object:
      return "an object";
    case json::value_t::null:
      return "null";
    case json::value_t::boolean:
      return "a boolean";
    default:
      return "a number";
  }
}

// The member `key` of `object`, which must exist and have the type `is` checks.
const json& member(const json& object, const std::string& key, bool (json::*is)() const,
                   const char* expected, const std::string& name, const std::string& at) {
  const auto it = object.find(key);
  if (it == object.end()) fail("{}: {}{} is missing", name, at, key);
  if (!((*it).*is)())
    fail("{}: {}{} is {} but expected {}", name, at, key, type_article(*it), expected);
  return *it;
}

}  // namespace

std::filesystem::path run_json_path(const std::filesystem::path& run_dir) {
  return run_dir / "run.json";
}

json to_json(const RunInfo& info) {
  json out = info.other;
  out["format_version"] = kRunJsonFormatVersion;
  json plugins = json::array();
  for (const PluginRecord& p : info.plugins)
    plugins.push_back({{"path", p.path}, {"sha256", p.sha256}});
  out["plugins"] = std::move(plugins);
  return out;
}

RunInfo run_info_from_json(const json& document, const std::string& name) {
  if (!document.is_object()) fail("{}: expected a JSON object", name);
  const int64_t version =
      member(document, "format_version", &json::is_number_integer, "an integer", name, "")
          .get<int64_t>();
  if (version > kRunJsonFormatVersion)
    fail(
        "{}: format_version is {}, but this headlab reads up to {}: the run was written by a "
        "newer headlab",
        name, version, kRunJsonFormatVersion);
  if (version < 1) fail("{}: format_version is {} but expected >= 1", name, version);
  RunInfo info;
  const json& plugins = member(document, "plugins", &json::is_array, "an array", name, "");
  for (size_t i = 0; i < plugins.size(); ++i) {
    const std::string at = fmt::format("plugins[{}].", i);
    if (!plugins[i].is_object())
      fail("{}: plugins[{}] is {} but expected an object", name, i, type_article(plugins[i]));
    PluginRecord p;
    p.path = member(plugins[i], "path", &json::is_string, "a string", name, at).get<std::string>();
    p.sha256 =
        member(plugins[i], "sha256", &json::is_string, "a string", name, at).get<std::string>();
    if (p.path.empty() || p.path[0] != '/')
      fail("{}: {}path is \"{}\" but expected an absolute path", name, at, p.path);
    info.plugins.push_back(std::move(p));
  }
  info.other = document;
  info.other.erase("format_version");
  info.other.erase("plugins");
  return info;
}

std::optional<RunInfo> read_run_info(const std::filesystem::path& run_dir) {
  const std::filesystem::path path = run_json_path(run_dir);
  const std::optional<json> document = read_json_file_if_present(path, kMaxRunJsonBytes);
  if (!document) return std::nullopt;
  return run_info_from_json(*document, path.string());
}

void write_run_info(const std::filesystem::path& run_dir, const RunInfo& info) {
  write_file_atomic(run_json_path(run_dir), to_json(info).dump(2) + "\n");
}

}  // namespace headlab
