// Plugins on the command line: --plugin PATH (train, sweep, info, gradcheck). The plugins a run
// directory recorded (eval, analyze, train --resume) and recording them: train/run/run_plugins.h.

#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "train/cli/commands.h"
#include "train/cli/options.h"
#include "train/io/files.h"
#include "train/plugins/loader.h"
#include "train/run/run_plugins.h"

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

void load_plugin_flags(const std::vector<std::string>& plugins) {
  for (const std::string& p : plugins) check_path_value("--plugin", p, "a shared library file");
  load_named_plugins(plugins, "--plugin");
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
