// Plugins on the command line: --plugin PATH (train, sweep, info, gradcheck), the plugins a run
// directory recorded in run.json (eval, analyze, train --resume), and recording them when a run
// starts. Loading itself is train/plugins/loader.h.

#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "train/cli/commands.h"
#include "train/cli/options.h"
#include "train/io/files.h"
#include "train/plugins/loader.h"
#include "train/run/run_json.h"

namespace headlab::cli {

namespace fs = std::filesystem;

void add_plugin_option(CLI::App* cmd, std::vector<std::string>& plugins) {
  cmd->add_option("--plugin", plugins,
                  "Load a plugin (a shared library built against headlab) that registers layers "
                  "and tasks, before the config is read (repeatable; docs/extending.md)")
      ->type_name("PATH")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
}

void load_config_plugin(const fs::path& plugin) {
  load_plugin(plugin);
}

void load_plugin_flags(const std::vector<std::string>& plugins) {
  for (const std::string& p : plugins) check_path_value("--plugin", p, "a shared library file");
  for (const std::string& p : plugins) {
    try {
      load_plugin(p);
    } catch (const Error& e) {
      fail("--plugin: {}", e.what());
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

std::string plugins_text() {
  const std::vector<LoadedPlugin> plugins = loaded_plugins();
  std::string out =
      plugins.empty() ? "plugins: none\n" : fmt::format("plugins: {}\n", plugins.size());
  for (const LoadedPlugin& p : plugins) {
    out += fmt::format("  {} (sha256 {})\n", p.path.string(), p.sha256);
    for (const PluginItem& item : p.registered) out += fmt::format("    {}\n", item.describe());
  }
  return out;
}

}  // namespace headlab::cli
