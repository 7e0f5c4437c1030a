#pragma once
// run.json: what a run directory records about how the run was made, beside its config.
//
//   {"format_version": 1,
//    "plugins": [{"path": "/abs/path/libmine.so", "sha256": "<64 hex digits>"}, ...]}
//
// plugins: every plugin loaded when the run was trained (--plugin or runtime.plugins), so that
// `headlab eval`, `analyze` and `train --resume` load them again without flags, and refuse a
// plugin that is missing or has changed (train/plugins/loader.h). The CLI writes it when
// training starts.
//
// Adding a field: a member of RunInfo, one line in to_json and one in run_info_from_json.
// Fields this version does not know (a newer headlab's) are kept in `other` as read and
// written back unchanged. Writing is atomic (write_file_atomic: the old file or the new one,
// never a mix); reading goes through the bounded JSON reader, and every problem is one
// headlab::Error line naming run.json.

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace headlab {

// The format this headlab writes, and the newest it reads.
inline constexpr int64_t kRunJsonFormatVersion = 1;

struct PluginRecord {
  std::string path;  // absolute
  std::string sha256;
};

struct RunInfo {
  std::vector<PluginRecord> plugins;
  nlohmann::json other = nlohmann::json::object();  // fields not read by this version
};

std::filesystem::path run_json_path(const std::filesystem::path& run_dir);

nlohmann::json to_json(const RunInfo& info);
// Throws "<name>: plugins[0].sha256 is a number but expected a string", "<name>: format_version
// is 2, but this headlab reads up to 1", ...
RunInfo run_info_from_json(const nlohmann::json& document, const std::string& name);

// <run_dir>/run.json, or nullopt when there is none (a run of headlab 0.1).
std::optional<RunInfo> read_run_info(const std::filesystem::path& run_dir);
void write_run_info(const std::filesystem::path& run_dir, const RunInfo& info);

}  // namespace headlab
