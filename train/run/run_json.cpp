#include "train/run/run_json.h"

#include <fcntl.h>
#include <unistd.h>

#include <ctime>

#include <fmt/format.h>

#include "core/error.h"
#include "core/kernels/kernels.h"
#include "core/openmp_wait.h"
#include "core/threads.h"
#include "core/version.h"
#include "headlab_build_info.h"
#include "train/config/config.h"
#include "train/io/files.h"
#include "train/io/json.h"
#include "train/io/sha256.h"
#include "train/run/checkpoint.h"

namespace headlab {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr uint64_t kMaxRunJsonBytes = 16 << 20;

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

// The "model name" of /proc/cpuinfo (a file whose size reads as 0: read it to its end, bounded).
std::string cpu_model() {
  const int fd = ::open("/proc/cpuinfo", O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return "unknown";
  std::string text;
  char chunk[4096];
  ssize_t n;
  while (text.size() < (256 << 10) && (n = ::read(fd, chunk, sizeof chunk)) > 0)
    text.append(chunk, static_cast<size_t>(n));
  ::close(fd);
  const size_t at = text.find("model name");
  if (at == std::string::npos) return "unknown";
  const size_t colon = text.find(':', at), end = text.find('\n', at);
  if (colon == std::string::npos || colon > end) return "unknown";
  std::string model = text.substr(colon + 1, end - colon - 1);
  while (!model.empty() && model.front() == ' ') model.erase(0, 1);
  return model.empty() ? "unknown" : model;
}

}  // namespace

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

json build_provenance() {
  const BlasInfo blas = blas_info();
  const OneDnnInfo dnnl = onednn_info();
  json libraries = library_versions();
  libraries.erase("headlab");
  libraries["onednn_isa"] = dnnl.isa;
  libraries["onednn_runtime"] = dnnl.runtime;
  libraries["openblas_core"] = blas.core_name;
  libraries["openblas_threading"] = blas.parallel;
  return {{"headlab",
           {{"version", HEADLAB_VERSION},
            {"git_commit", HEADLAB_GIT_COMMIT},
            {"git_dirty", HEADLAB_GIT_DIRTY != 0},
            {"build_type", HEADLAB_BUILD_TYPE},
            {"compiler", HEADLAB_COMPILER}}},
          {"backend", backend_name(current_backend())},
          {"libraries", libraries},
          {"cpu",
           {{"model", cpu_model()},
            {"hardware_threads", hardware_threads()},
            {"threads", num_threads()},
            {"openmp_wait", openmp_wait_setting()}}}};
}

fs::path run_json_path(const fs::path& run_dir) {
  return run_dir / "run.json";
}

json read_run_json(const fs::path& run_dir) {
  const fs::path path = run_json_path(run_dir);
  json doc = read_json_file_if_present(path, kMaxRunJsonBytes).value_or(json::object());
  if (const auto it = doc.find("format_version"); it != doc.end()) {
    if (!it->is_number_integer())
      fail("{}: format_version is {} but expected an integer", path.string(), type_article(*it));
    const int64_t version = it->get<int64_t>();
    if (version > kRunJsonFormatVersion)
      fail(
          "{}: format_version is {}, but this headlab reads up to {}: the run was written by a "
          "newer headlab",
          path.string(), version, kRunJsonFormatVersion);
  }
  return doc;
}

void write_run_json(const fs::path& run_dir, json doc) {
  doc["format_version"] = kRunJsonFormatVersion;
  write_file_atomic(run_json_path(run_dir), doc.dump(2) + "\n");
}

void record_session_start(const fs::path& run_dir, const std::vector<std::string>& command,
                          int64_t start_step) {
  json doc = read_run_json(run_dir);
  std::error_code ec;
  const std::string cwd = fs::current_path(ec).string();
  const std::string now = utc_now();
  doc.update(build_provenance());
  doc["command"] = command;
  doc["cwd"] = cwd;
  if (!doc.contains("start") || !doc["start"].is_string()) doc["start"] = now;
  doc["end"] = nullptr;
  doc["outcome"] = "running";
  if (!doc.contains("sessions") || !doc["sessions"].is_array()) doc["sessions"] = json::array();
  doc["sessions"].push_back({{"command", command},
                             {"cwd", cwd},
                             {"start", now},
                             {"end", nullptr},
                             {"start_step", start_step},
                             {"end_step", nullptr},
                             {"outcome", "running"}});
  write_run_json(run_dir, doc);
}

void record_session_end(const fs::path& run_dir, const std::string& outcome, int64_t end_step) {
  json doc = read_run_json(run_dir);
  const std::string now = utc_now();
  doc["end"] = now;
  doc["outcome"] = outcome;
  if (doc.contains("sessions") && doc["sessions"].is_array() && !doc["sessions"].empty()) {
    json& last = doc["sessions"].back();
    if (last.is_object()) {
      last["end"] = now;
      last["end_step"] = end_step;
      last["outcome"] = outcome;
    }
  }
  write_run_json(run_dir, doc);
}

std::vector<PluginRecord> plugins_from_json(const json& document, const std::string& name) {
  std::vector<PluginRecord> out;
  const auto it = document.find("plugins");
  if (it == document.end()) return out;
  if (!it->is_array()) fail("{}: plugins is {} but expected an array", name, type_article(*it));
  const json& plugins = *it;
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
    out.push_back(std::move(p));
  }
  return out;
}

std::vector<PluginRecord> read_run_plugins(const fs::path& run_dir) {
  return plugins_from_json(read_run_json(run_dir), run_json_path(run_dir).string());
}

void write_run_plugins(const fs::path& run_dir, const std::vector<PluginRecord>& plugins) {
  json doc = read_run_json(run_dir);
  json list = json::array();
  for (const PluginRecord& p : plugins) list.push_back({{"path", p.path}, {"sha256", p.sha256}});
  doc["plugins"] = std::move(list);
  write_run_json(run_dir, std::move(doc));
}

std::vector<DataFileRecord> measure_data_files(const Config& config) {
  std::vector<DataFileRecord> out;
  for (const auto& [key, value] : config.task.options) {
    const std::string* path = value.get_if<std::string>();
    if (!key.ends_with("_file") || !path || path->empty()) continue;
    DataFileRecord r{"task." + key, *path, 0, ""};
    std::error_code error;
    r.bytes = fs::file_size(*path, error);
    if (error) fail("task.{}: cannot read '{}': {}", key, *path, error.message());
    r.sha256 = sha256_file(*path);
    out.push_back(std::move(r));
  }
  return out;
}

void record_run_data_files(const fs::path& run_dir, const Config& config) {
  json list = json::array();
  for (const DataFileRecord& r : measure_data_files(config))
    list.push_back({{"key", r.key}, {"path", r.path}, {"bytes", r.bytes}, {"sha256", r.sha256}});
  json doc = read_run_json(run_dir);
  if (list.empty() && !doc.contains("data_files")) return;
  doc["data_files"] = std::move(list);
  write_run_json(run_dir, std::move(doc));
}

void check_run_data_files(const fs::path& run_dir) {
  const json doc = read_run_json(run_dir);
  const auto it = doc.find("data_files");
  if (it == doc.end()) return;
  const std::string name = run_json_path(run_dir).string();
  if (!it->is_array()) fail("{}: data_files is {} but expected an array", name, type_article(*it));
  for (size_t i = 0; i < it->size(); ++i) {
    const json& f = (*it)[i];
    const std::string at = fmt::format("data_files[{}].", i);
    if (!f.is_object())
      fail("{}: data_files[{}] is {} but expected an object", name, i, type_article(f));
    const auto key = member(f, "key", &json::is_string, "a string", name, at).get<std::string>();
    const auto path = member(f, "path", &json::is_string, "a string", name, at).get<std::string>();
    const auto then =
        member(f, "sha256", &json::is_string, "a string", name, at).get<std::string>();
    std::error_code error;
    if (!fs::is_regular_file(path, error))
      fail("{}: {} '{}' is missing or not a regular file (sha256 {} when the run was trained)",
           name, key, path, then);
    const std::string now = sha256_file(path);
    if (now != then)
      fail("{}: {} '{}' has changed since the run was trained (sha256 {} then, {} now)", name, key,
           path, then, now);
  }
}

}  // namespace headlab
