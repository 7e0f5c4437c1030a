#include "train/run/run_plugins.h"

#include <algorithm>

#include "core/error.h"
#include "train/io/files.h"
#include "train/plugins/loader.h"
#include "train/run/run_json.h"

namespace headlab {

namespace fs = std::filesystem;

void load_config_plugin(const fs::path& plugin) {
  load_plugin(plugin);
}

void load_named_plugins(const std::vector<std::string>& plugins, const std::string& flag) {
  for (const std::string& p : plugins) {
    try {
      load_plugin(p);
    } catch (const Error& e) {
      fail("{}: {}", flag, e.what());
    }
  }
}

void load_run_plugins(const fs::path& run_dir) {
  check_run_data_files(run_dir);  // the task's data files too (run_json.h)
  for (const PluginRecord& p : read_run_plugins(run_dir)) {
    try {
      load_plugin(p.path, p.sha256);
    } catch (const Error& e) {
      fail("{}: {}", run_json_path(run_dir).string(), e.what());
    }
  }
}

void record_run_plugins(const fs::path& run_dir) {
  std::vector<PluginRecord> records = read_run_plugins(run_dir);
  for (const LoadedPlugin& p : loaded_plugins()) {
    const bool known = std::any_of(records.begin(), records.end(), [&](const PluginRecord& r) {
      return r.path == p.path.string();
    });
    if (!known) records.push_back({p.path.string(), p.sha256});
  }
  make_directories(run_dir);
  write_run_plugins(run_dir, records);
}

}  // namespace headlab
