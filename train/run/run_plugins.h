#pragma once
// The plugins of a run: the ones a caller names (the CLI's --plugin, headlab.train's plugins=),
// the ones a config names (runtime.plugins), the ones a run directory recorded in run.json
// (eval, analyze, train --resume, a model loaded from Python), and recording them when a run
// starts. Loading itself is train/plugins/loader.h.

#include <filesystem>
#include <string>
#include <vector>

namespace headlab {

// Loads a plugin that a config names (runtime.plugins): the PluginLoader the CLI and the Python
// module hand to every config they read (train/config/config.h).
void load_config_plugin(const std::filesystem::path& plugin);
// Loads each of `plugins`; an error is "<flag>: <the loader's message>" (flag: "--plugin").
void load_named_plugins(const std::vector<std::string>& plugins, const std::string& flag);
// Loads the plugins <run_dir>/run.json records, each checked against its sha256 (none: no-op);
// the task's data files are checked first (check_run_data_files).
void load_run_plugins(const std::filesystem::path& run_dir);
// Adds every loaded plugin to <run_dir>/run.json (created when absent; other fields kept).
void record_run_plugins(const std::filesystem::path& run_dir);

}  // namespace headlab
