#include "train/plugins/loader.h"

#include <dlfcn.h>

#include <algorithm>
#include <deque>
#include <set>

#include <fmt/format.h>

#include "autograd/checks/op_checks.h"
#include "autograd/op_registry.h"
#include "core/error.h"
#include "train/io/files.h"
#include "train/io/sha256.h"
#include "train/plugins/elf_check.h"
#include "train/plugins/plugin.h"

namespace headlab {
namespace {

namespace fs = std::filesystem;

std::deque<LoadedPlugin>& loaded() {
  static std::deque<LoadedPlugin> plugins;
  return plugins;
}

[[noreturn]] void refuse(const std::string& plugin, const std::string& cause) {
  fail("plugin '{}': {}", plugin, cause);
}

constexpr const char* kNothingKept = "; nothing it registered was kept";

// dlopen's handle, closed unless released (a plugin that failed is unloaded again).
class Library {
 public:
  explicit Library(void* handle) : handle_(handle) {}
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;
  ~Library() {
    if (handle_) dlclose(handle_);
  }
  void* get() const { return handle_; }
  void release() { handle_ = nullptr; }

 private:
  void* handle_;
};

// dlerror's message without the path it starts with (the error names the plugin already).
std::string dl_error(const std::string& path) {
  const char* e = dlerror();
  std::string s = e ? e : "unknown error";
  if (s.starts_with(path + ": ")) s.erase(0, path.size() + 2);
  return s;
}

void check_file(const std::string& name, const fs::path& path) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (!fs::exists(st)) refuse(name, "no such file");
  if (fs::is_directory(st)) refuse(name, "is a directory, not a shared library file");
  if (!fs::is_regular_file(st)) refuse(name, "is not a regular file (expected a shared library)");
}

void check_handshake(const std::string& name, const headlab_plugin_info* info) {
  if (info == nullptr || info->magic != kHeadlabPluginMagic)
    refuse(name, "its entry point headlab_plugin_entry does not answer the headlab handshake");
  const std::string version = info->version ? info->version : "(none)";
  if (info->abi != HEADLAB_PLUGIN_ABI || version != HEADLAB_VERSION)
    refuse(name, fmt::format("was built against headlab {} (plugin ABI {}), but this is headlab {} "
                             "(plugin ABI {}): rebuild it against this headlab",
                             version, info->abi, HEADLAB_VERSION, HEADLAB_PLUGIN_ABI));
  // abi is 6 or more here: the fingerprint is there to read.
  const std::string headers = info->headers ? info->headers : "(none)";
  if (headers != HEADLAB_HEADERS_FINGERPRINT)
    refuse(name, fmt::format("was built against other headers than this headlab's, though both say "
                             "headlab {} (header fingerprint {}..., this headlab's {}...): rebuild "
                             "it against this headlab",
                             version, headers.substr(0, 12),
                             std::string_view(HEADLAB_HEADERS_FINGERPRINT).substr(0, 12)));
  const std::string build = info->build ? info->build : "(none)";
  if (build != HEADLAB_PLUGIN_BUILD)
    refuse(name, fmt::format("was built with another C++ ABI ({}) than this headlab ({}): rebuild "
                             "it with the same compiler and standard library",
                             build, HEADLAB_PLUGIN_BUILD));
  if (info->register_plugin == nullptr) refuse(name, "its handshake has no registration function");
}

// Who holds a name already: "built in" or "by plugin '<path>'".
std::string owner(const std::string& type, const std::string& name) {
  for (const LoadedPlugin& p : loaded())
    for (const PluginItem& item : p.registered)
      if (item.type == type && item.name == name)
        return fmt::format("by plugin '{}'", p.path.string());
  return "built in";
}

// Optimizer and schedule names: each once, none taken.
void check_optim_names(const std::string& plugin, const PluginRegistry& r) {
  std::set<std::string> optimizers, schedules;
  for (const auto& o : r.optimizers()) {
    if (!optimizers.insert(o.name).second)
      refuse(plugin, fmt::format("registers optimizer '{}' twice{}", o.name, kNothingKept));
    if (has_optimizer(o.name))
      refuse(plugin, fmt::format("registers optimizer '{}', which is already registered ({}){}",
                                 o.name, owner("optimizer", o.name), kNothingKept));
  }
  for (const auto& s : r.schedules()) {
    if (!schedules.insert(s.name).second)
      refuse(plugin, fmt::format("registers schedule '{}' twice{}", s.name, kNothingKept));
    if (has_schedule(s.name))
      refuse(plugin, fmt::format("registers schedule '{}', which is already registered ({}){}",
                                 s.name, owner("schedule", s.name), kNothingKept));
  }
}

void check_names(const std::string& plugin, const PluginRegistry& r) {
  std::set<std::string> layers, tasks, ops;
  for (const auto& l : r.layers()) {
    if (!layers.insert(l.name).second)
      refuse(plugin, fmt::format("registers layer '{}' twice{}", l.name, kNothingKept));
    if (has_layer(l.name))
      refuse(plugin, fmt::format("registers layer '{}', which is already registered ({}){}", l.name,
                                 owner("layer", l.name), kNothingKept));
  }
  for (const auto& t : r.tasks()) {
    if (!tasks.insert(t.name).second)
      refuse(plugin, fmt::format("registers task '{}' twice{}", t.name, kNothingKept));
    if (has_task(t.name))
      refuse(plugin, fmt::format("registers task '{}', which is already registered ({}){}", t.name,
                                 owner("task", t.name), kNothingKept));
  }
  const std::vector<std::string> builtin_ops = differentiable_op_names();
  for (const auto& o : r.ops()) {
    if (!ops.insert(o.name).second)
      refuse(plugin, fmt::format("registers op '{}' twice{}", o.name, kNothingKept));
    const bool builtin =
        std::find(builtin_ops.begin(), builtin_ops.end(), o.name) != builtin_ops.end();
    if (builtin || has_op(o.name))
      refuse(plugin, fmt::format("registers op '{}', which is already registered ({}){}", o.name,
                                 builtin ? "built in" : owner("op", o.name), kNothingKept));
  }
  check_optim_names(plugin, r);
}

// Undoes one registration of commit().
void unregister_item(const PluginItem& item) {
  if (item.type == "layer") unregister_layer(item.name);
  if (item.type == "task") unregister_task(item.name);
  if (item.type == "op") unregister_op(item.name);
  if (item.type == "optimizer") unregister_optimizer(item.name);
  if (item.type == "schedule") unregister_schedule(item.name);
}

// Registers every staged entry, or none: a failure half-way undoes what it did.
std::vector<PluginItem> commit(const std::string& plugin, const PluginRegistry& r) {
  std::vector<PluginItem> done;
  try {
    for (const auto& l : r.layers()) {
      register_layer(l.name, l.kind, l.factory, l.count, l.checks);
      done.push_back({"layer", l.name, layer_kind_name(l.kind)});
    }
    for (const auto& t : r.tasks()) {
      register_task(t.name, t.factory);
      done.push_back({"task", t.name, ""});
    }
    for (const auto& o : r.ops()) {
      register_op(o.name, o.function, o.cases);
      done.push_back({"op", o.name, fmt::format("{} gradcheck cases", o.cases.size())});
    }
    for (const auto& o : r.optimizers()) {
      register_optimizer(o.name, o.factory, o.state_tensors, o.options);
      done.push_back({"optimizer", o.name, ""});
    }
    for (const auto& s : r.schedules()) {
      register_schedule(s.name, s.factory, s.options);
      done.push_back({"schedule", s.name, ""});
    }
  } catch (const std::exception& e) {  // a case register_op refuses (no variant, a twin)
    for (const PluginItem& item : done) unregister_item(item);
    refuse(plugin, std::string("registration failed: ") + e.what() + kNothingKept);
  } catch (...) {
    for (const PluginItem& item : done) unregister_item(item);
    throw;
  }
  return done;
}

// Names registered while the library was opened, by static registrars: undone and refused.
// Every registered name by type, sorted, to see what a dlopen added.
struct RegisteredNames {
  std::vector<std::string> layers = registered_layers();
  std::vector<std::string> tasks = registered_tasks();
  std::vector<std::string> optimizers = registered_optimizers();
  std::vector<std::string> schedules = registered_schedules();
  std::vector<std::string> ops = registered_ops();
};

void refuse_static_registrations(const std::string& plugin, const RegisteredNames& before) {
  std::vector<PluginItem> added;
  const RegisteredNames now;
  auto compare = [&](const char* type, const std::vector<std::string>& was,
                     const std::vector<std::string>& is) {
    for (const std::string& n : is)
      if (!std::binary_search(was.begin(), was.end(), n)) added.push_back({type, n, ""});
  };
  compare("layer", before.layers, now.layers);
  compare("task", before.tasks, now.tasks);
  compare("optimizer", before.optimizers, now.optimizers);
  compare("schedule", before.schedules, now.schedules);
  compare("op", before.ops, now.ops);
  if (added.empty()) return;
  for (const PluginItem& item : added) unregister_item(item);
  refuse(plugin, fmt::format("registers {} '{}' at load time, outside its entry point (a static "
                             "registrar): register in HEADLAB_PLUGIN instead{}",
                             added[0].type, added[0].name, kNothingKept));
}

// Runs the plugin's registration and commits it; throws with nothing registered otherwise.
std::vector<PluginItem> register_plugin(const std::string& plugin,
                                        const headlab_plugin_info& info) {
  std::string error;
  PluginRegistry registry;
  try {
    info.register_plugin(&registry);
  } catch (const std::exception& e) {  // copied here: the exception dies before the library
    error = e.what();
  } catch (...) {
    error = "it threw something that is not a std::exception";
  }
  if (!error.empty()) refuse(plugin, "registration failed: " + error + kNothingKept);
  check_names(plugin, registry);
  return commit(plugin, registry);
}

}  // namespace

std::string PluginItem::describe() const {
  return kind.empty() ? type + " " + name : fmt::format("{} {} ({})", type, name, kind);
}

LoadedPlugin load_plugin(const fs::path& path, std::string_view expected_sha256) {
  if (path.empty()) refuse("", "the path is empty (expected a shared library file)");
  const fs::path absolute = absolute_normal_path(path);
  const std::string name = absolute.string();
  check_file(name, absolute);
  // Before dlopen maps it (a truncated file would end the process with SIGBUS) and before it is
  // hashed (a huge file is refused by its size).
  if (const std::string problem = elf_file_problem(absolute); !problem.empty())
    refuse(name, "cannot be loaded as a shared library: " + problem);
  const fs::path canonical = fs::canonical(absolute);
  const std::string sha = sha256_file(absolute);
  if (!expected_sha256.empty() && sha != expected_sha256)
    refuse(name, fmt::format("has changed since the run recorded it (sha256 {}... in run.json, "
                             "{}... now): restore that build of the plugin, or train a new run",
                             expected_sha256.substr(0, 12), sha.substr(0, 12)));
  for (const LoadedPlugin& p : loaded())
    if (p.canonical == canonical) return p;  // the same file twice: a no-op

  const RegisteredNames before;
  Library library(dlopen(absolute.c_str(), RTLD_NOW | RTLD_LOCAL));
  if (!library.get())
    refuse(name, "cannot be loaded as a shared library: " + dl_error(absolute.string()));
  refuse_static_registrations(name, before);
  using Entry = const headlab_plugin_info* (*)();
  auto entry = reinterpret_cast<Entry>(dlsym(library.get(), kPluginEntryPoint));
  if (!entry)
    refuse(name,
           "has no entry point headlab_plugin_entry (write one with HEADLAB_PLUGIN, "
           "train/plugins/plugin.h)");
  const headlab_plugin_info* info = entry();
  check_handshake(name, info);
  LoadedPlugin plugin{absolute, canonical, sha, register_plugin(name, *info)};
  library.release();
  loaded().push_back(plugin);
  return plugin;
}

std::vector<LoadedPlugin> loaded_plugins() {
  return {loaded().begin(), loaded().end()};
}

}  // namespace headlab
