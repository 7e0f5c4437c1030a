#pragma once
// Loading plugins (train/plugins/plugin.h says what a plugin is and how it registers). The
// library never prints: every refusal is a headlab::Error of one line that starts with
// "plugin '<absolute path>': " and names the cause:
//
//   the path is empty (expected a shared library file)
//   no such file / is a directory, not a shared library file
//   cannot be loaded as a shared library: <why>    (checked before dlopen, elf_check.h: too
//       large, not ELF, another machine or class, not ET_DYN, truncated; then dlerror's
//       message: missing symbols, ...)
//   has no entry point headlab_plugin_entry             (no HEADLAB_PLUGIN in it)
//   its entry point does not answer the headlab handshake
//   was built against headlab 0.1.0 (plugin ABI 3), but this is headlab 0.2.0 (plugin ABI 4)
//   was built against other headers than this headlab's, though both say headlab 0.2.0
//       (header fingerprint ...): rebuild it against this headlab
//   was built with another C++ ABI (...) than this headlab (...)
//   registration failed: <what it threw>
//   registers layer 'x', which is already registered (built in | by plugin '<path>')
//   registers layer 'x' at load time, outside its entry point (a static registrar)
//   has changed since the run recorded it (sha256 ...)
//
// and after any of them nothing the plugin registered stays registered and the library is
// closed again. A plugin that loads stays loaded for the life of the process (its code is in
// the registries). Loading is not thread-safe: load plugins before training starts.

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace headlab {

// One name a plugin registered.
struct PluginItem {
  std::string type;  // "layer", "task", "op", "optimizer" or "schedule"
  std::string name;
  std::string kind;  // a layer's kind (layer_kind_name), an op's case count, "" for a task
  // "layer swiglu (feed_forward)", "task mirror", "op squareplus (3 gradcheck cases)".
  std::string describe() const;
};

struct LoadedPlugin {
  std::filesystem::path path;          // absolute and normal, as given (what run.json records)
  std::filesystem::path canonical;     // symbolic links resolved (what identifies it)
  std::string sha256;                  // of the file when it was loaded
  std::vector<PluginItem> registered;  // in its order
};

// Loads the plugin at `path` (relative paths are taken from the current directory), or does
// nothing when the same file (by canonical path) is loaded already. With `expected_sha256`, the
// file must still have that digest (the run directory's record). Returns the loaded plugin.
LoadedPlugin load_plugin(const std::filesystem::path& path, std::string_view expected_sha256 = {});

// Every plugin loaded so far, in load order.
std::vector<LoadedPlugin> loaded_plugins();

}  // namespace headlab
