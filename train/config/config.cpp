// Reading the config: toml++ parses, the key schema (schema.h) decides what is allowed.
// Writing it back (to_toml, the hash, differences) is resolved.cpp.

#include "train/config/config.h"

#include <algorithm>

#include "core/error.h"
#include "layers/registry.h"
#include "optim/registry.h"
#include "optim/schedule_registry.h"
#include "train/config/optim_tables.h"
#include "train/config/overrides.h"
#include "train/config/schema.h"
#include "train/config/toml_values.h"
#include "train/io/files.h"
#include "train/tasks/registry.h"

namespace headlab {
namespace {

namespace fs = std::filesystem;

// One key's value as found in the file or an override, before conversion.
struct Entry {
  const KeySpec* spec;
  const toml::node* node;
  std::string where;
};

ConfigValue convert(const KeySpec& spec, const toml::node& node, const std::string& where) {
  OptionValue value = to_option_value(node, where);
  value.where = where;
  return convert_option(spec.key, spec, value);
}

// The spec a value is checked against: the schema's, except that task.name's choices are the
// registered tasks (a program or plugin may add one before loading).
KeySpec checked_spec(const KeySpec& spec) {
  KeySpec s = spec;
  if (s.key == "task.name") s.choices = registered_tasks();
  if (s.key == "optim.name") s.choices = registered_optimizers();
  if (s.key == "schedule.name") s.choices = registered_schedules();
  return s;
}

// A known leaf name in another table ("train.lr" -> "optim.lr"), else the closest dotted key
// (of the schema's, the option tables' and `more`).
std::string suggest_key(const std::string& table, const std::string& leaf,
                        const std::vector<std::string>& more = {}) {
  std::vector<std::string> all = more;
  for (const auto& k : config_keys()) all.push_back(k.key);
  for (const auto& t : option_tables()) all.push_back(t.key);
  std::string best = closest_match(table + "." + leaf, all);
  if (!best.empty()) return best;
  for (const auto& k : config_keys())
    if (k.key.substr(k.key.find('.') + 1) == leaf) return k.key;
  return {};
}

[[noreturn]] void unknown_key(const std::string& where, const std::string& table,
                              const std::string& leaf, const std::vector<std::string>& more = {}) {
  const std::string hint = suggest_key(table, leaf, more);
  fail("{}: unknown key {}.{}{}", where, table, leaf,
       hint.empty() ? "" : fmt::format(" (did you mean {}?)", hint));
}

const OptionTableSpec* find_option_table(std::string_view dotted) {
  for (const auto& t : option_tables())
    if (t.key == dotted) return &t;
  return nullptr;
}

// "task.<key>" other than task.name: an option the task reads itself.
bool is_task_option(std::string_view dotted) {
  return dotted.starts_with("task.") && dotted != "task.name" &&
         dotted.find('.', 5) == std::string_view::npos;
}

// What the file and the overrides say, before conversion.
struct Collected {
  std::vector<Entry> entries;
  // Option tables found in the file, by OptionTableSpec::key, and where each starts.
  std::map<std::string, toml::table*> option_tables;
  std::map<std::string, std::string> option_origins;
  OptionMap task_options;  // [task]'s keys but name
};

// A top-level name that is not one of the tables: a key outside any table (suggest the table
// that has it) or an unknown table (suggest the closest).
[[noreturn]] void not_a_table(const std::string& name, const toml::node& node,
                              const std::string& where) {
  if (!node.is_table()) {
    for (const auto& spec : config_keys())
      if (spec.key.substr(spec.key.find('.') + 1) == name)
        fail("{}: unknown key {} (did you mean {}, in table [{}]?)", where, name, spec.key,
             spec.key.substr(0, spec.key.find('.')));
    fail(
        "{}: unknown key {} (keys belong in one of the tables [model], [task], [optim], "
        "[schedule], [train], [runtime])",
        where, name);
  }
  const std::string hint = closest_match(name, config_tables());
  fail("{}: unknown table [{}]{}", where, name,
       hint.empty() ? "" : fmt::format(" (did you mean [{}]?)", hint));
}

// One key of table `name`: a slot's option table, a task option or a schema key.
void collect_key(const std::string& name, const toml::key& k, toml::node& value,
                 std::string_view source, Collected& out) {
  const std::string leaf(k.str());
  const std::string dotted = name + "." + leaf;
  if (find_option_table(dotted) || is_optim_table(dotted)) {
    toml::table* options = value.as_table();
    if (!options)
      fail("{}: {} has type {} but expected a table of {}", position(value.source(), source),
           dotted, node_type_name(value),
           is_optim_table(dotted) ? optim_table_contents(dotted) : "layer options");
    out.option_tables[dotted] = options;
    out.option_origins[dotted] = position(k.source(), source);
  } else if (is_task_option(dotted)) {
    OptionValue v = to_option_value(value, source);
    v.key_where = position(k.source(), source);
    out.task_options.set(leaf, std::move(v));
  } else if (const KeySpec* spec = find_key(dotted)) {
    out.entries.push_back({spec, &value, position(value.source(), source)});
  } else {
    unknown_key(position(k.source(), source), name, leaf);
  }
}

void collect(toml::table& root, std::string_view source, Collected& out) {
  const auto& tables = config_tables();
  for (auto&& [k, node] : root) {
    const std::string name(k.str());
    const std::string where = position(k.source(), source);
    if (std::find(tables.begin(), tables.end(), name) == tables.end())
      not_a_table(name, node, where);
    toml::table* table = node.as_table();
    if (!table) fail("{}: {} has type {} but expected a table", where, name, node_type_name(node));
    for (auto&& [k2, value] : *table) collect_key(name, k2, value, source, out);
  }
}

std::string trim(std::string s) {
  while (!s.empty() && s.back() == ' ') s.pop_back();
  while (!s.empty() && s.front() == ' ') s.erase(0, 1);
  return s;
}

// An override "a.b=value" (or "model.norm_options.eps=value"), parsed; `holder` owns the value.
struct Override {
  std::string key;
  std::string where;
  toml::table holder;
};

// The key of an override must be a schema key, a task option or one option of a slot's table
// ("model.norm_options.eps").
void check_override_key(const Override& o) {
  const size_t dot = o.key.find('.');
  const auto& tables = config_tables();
  if (dot == std::string::npos) {
    if (std::find(tables.begin(), tables.end(), o.key) != tables.end())
      fail("{}: {} is a table; set one of its keys (e.g. --set {}.<key>=<value>)", o.where, o.key,
           o.key);
    fail("{}: expected a dotted key table.key (e.g. model.heads), got \"{}\"", o.where, o.key);
  }
  const std::string table = o.key.substr(0, dot), leaf = o.key.substr(dot + 1);
  const size_t dot2 = leaf.find('.');
  if (dot2 != std::string::npos && is_optim_table(table + "." + leaf.substr(0, dot2))) {
    // optim.lr_scale's keys are patterns, dots and all: everything after the table's name.
    if (dot2 + 1 == leaf.size() ||
        (leaf.substr(0, dot2) != "lr_scale" && leaf.find('.', dot2 + 1) != std::string::npos))
      fail("{}: expected {}.<key>=<value>", o.where, table + "." + leaf.substr(0, dot2));
    return;
  }
  if (dot2 != std::string::npos && find_option_table(table + "." + leaf.substr(0, dot2))) {
    if (leaf.find('.', dot2 + 1) != std::string::npos || dot2 + 1 == leaf.size())
      fail("{}: expected {}.<option>=<value>", o.where, table + "." + leaf.substr(0, dot2));
    return;
  }
  if (find_key(o.key) || is_task_option(o.key)) return;
  if (std::find(tables.begin(), tables.end(), table) == tables.end()) {
    const std::string hint = suggest_key(table, leaf);
    fail("{}: unknown key {}{}", o.where, o.key,
         hint.empty() ? "" : fmt::format(" (did you mean {}?)", hint));
  }
  // the whole table, replaced (an inline table)
  if (find_option_table(o.key) || is_optim_table(o.key)) return;
  unknown_key(o.where, table, leaf);
}

// `origin` names the override in messages (default "--set <arg>").
Override parse_override(const std::string& arg, const std::string& origin) {
  Override o;
  o.where = origin.empty() ? "--set " + arg : origin;
  const size_t eq = arg.find('=');
  if (eq == std::string::npos) fail("{}: expected key=value (e.g. --set model.heads=8)", o.where);
  o.key = trim(arg.substr(0, eq));
  check_override_key(o);
  const std::string text = trim(arg.substr(eq + 1));
  if (text.find_first_of("\r\n") != std::string::npos)
    fail("{}: the value must be a single TOML value on one line", o.where);
  try {
    o.holder = toml::parse("value = " + override_as_toml(o.key, text), o.where);
  } catch (const toml::parse_error& e) {
    fail(
        "{}: the value is not valid TOML ({}); e.g. --set model.heads=8, --set model.norm=post, "
        "--set optim.betas=0.9,0.98",
        o.where, e.description());
  }
  if (o.holder.size() != 1 || !o.holder.contains("value"))
    fail("{}: the value must be a single TOML value", o.where);
  return o;
}

// A layer option's value; nested tables are refused (a layer reads plain values).
OptionValue layer_option(const std::string& table, const std::string& key, const toml::node& node,
                         std::string_view source) {
  if (node.is_table())
    fail("{}: {}.{} is a table, but layer options are plain values",
         position(node.source(), source), table, key);
  return to_option_value(node, source);
}

// Each slot's layer name as the file gives it (or the default), before the overrides: a --set
// that switches the layer drops the file's options table, which was the old layer's.
std::map<std::string, std::string> file_layer_names(const Collected& collected) {
  std::map<std::string, std::string> names;
  const Config defaults;
  for (const auto& spec : option_tables()) {
    const KeySpec* key = find_key(spec.layer_key);
    names[spec.key] = std::get<std::string>(key->get(defaults));
    for (const Entry& e : collected.entries)
      if (e.spec == key)
        if (auto name = e.node->value<std::string>()) names[spec.key] = *name;
  }
  return names;
}

// The table `key` from the file (while `keep_file`) and the overrides into it: an override of
// the whole table (--set model.norm_options={eps=1e-6}, or {} to clear it) replaces what came
// before it, and one entry (--set model.norm_options.eps=1e-6) is set on top, in order. With
// `override_where`, an override's value keeps the override as its position (errors about it
// then name it); otherwise the position is cleared and the caller prefixes it.
OptionMap build_table(const Collected& collected, const std::vector<Override>& overrides,
                      const std::string& key, bool keep_file, bool override_where, Config& config) {
  OptionMap options;
  if (auto it = collected.option_tables.find(key);
      keep_file && it != collected.option_tables.end()) {
    for (auto&& [k, node] : *it->second) {
      OptionValue v = layer_option(key, std::string(k.str()), node, config.source);
      v.key_where = position(k.source(), config.source);
      options.set(std::string(k.str()), std::move(v));
    }
    config.origins[key] = collected.option_origins.at(key);
  }
  for (const auto& o : overrides) {
    if (o.key == key) {
      const toml::table* table = o.holder.get("value")->as_table();
      if (!table)
        fail(
            "{}: {} is a table of {}: give an inline table (--set {}={{}} clears it) or set "
            "one {} (e.g. --set {}.{})",
            o.where, o.key, is_optim_table(key) ? optim_table_contents(key) : "layer options",
            o.key, is_optim_table(key) ? "entry" : "option", o.key,
            is_optim_table(key) ? "<key>=<value>" : "eps=1e-6");
      options = OptionMap();
      for (auto&& [k, node] : *table) {
        OptionValue v = layer_option(key, std::string(k.str()), node, config.source);
        v.where = override_where ? o.where : std::string();
        options.set(std::string(k.str()), std::move(v));
        config.origins[o.key + "." + std::string(k.str())] = o.where;
      }
      config.origins[key] = o.where;
      continue;
    }
    if (!o.key.starts_with(key + ".")) continue;
    const std::string option = o.key.substr(key.size() + 1);
    OptionValue v = layer_option(key, option, *o.holder.get("value"), config.source);
    v.where = override_where ? o.where : std::string();
    options.set(option, std::move(v));
    config.origins[o.key] = o.where;
  }
  return options;
}

// Builds the options of each slot, ordered by name. The file's table counts only while the slot
// keeps the file's layer.
void resolve_option_tables(const Collected& collected, const std::vector<Override>& overrides,
                           const std::map<std::string, std::string>& file_layers, Config& config) {
  for (const auto& spec : option_tables()) {
    const std::string layer = std::get<std::string>(find_key(spec.layer_key)->get(config));
    OptionMap options = build_table(collected, overrides, spec.key,
                                    file_layers.at(spec.key) == layer, false, config);
    options.sort();
    config.model.*spec.member = std::move(options);
  }
}

// The optimizer's and schedule's own tables and optim.lr_scale, checked against what the named
// optimizer and schedule declare. [optim.options] ([schedule.options]) counts only while
// optim.name (schedule.name) is the file's: a --set that switches it drops the old one's table.
void resolve_optim_tables(const Collected& collected, const std::vector<Override>& overrides,
                          const std::map<std::string, std::string>& file_names, Config& config) {
  resolve_optim_tables(
      config,
      build_table(collected, overrides, "optim.options",
                  file_names.at("optim.name") == config.optim.name, true, config),
      build_table(collected, overrides, "schedule.options",
                  file_names.at("schedule.name") == config.schedule.name, true, config),
      build_table(collected, overrides, "optim.lr_scale", true, true, config));
}

// optim.name and schedule.name as the file gives them (or the defaults), before the overrides.
std::map<std::string, std::string> file_optim_names(const Collected& collected) {
  const Config defaults;
  std::map<std::string, std::string> names = {{"optim.name", defaults.optim.name},
                                              {"schedule.name", defaults.schedule.name}};
  for (const Entry& e : collected.entries)
    if (names.contains(e.spec->key))
      if (auto name = e.node->value<std::string>()) names[e.spec->key] = *name;
  return names;
}

// The slots' layer names must be registered layers of the slot's kind.
void check_layer_names(const Config& config) {
  for (const auto& spec : option_tables()) {
    const KeySpec* key = find_key(spec.layer_key);
    const std::string name = std::get<std::string>(key->get(config));
    const std::string where = config.where(spec.layer_key);
    if (has_layer(name)) {
      check_layer_kind(name, spec.kind, spec.slot,
                       fmt::format("{}: {} = \"{}\"", where, spec.layer_key, name));
      continue;
    }
    const std::vector<std::string> known = registered_layers(spec.kind);
    const std::string hint = closest_match(name, known);
    std::string list;
    for (const auto& n : known) list += (list.empty() ? "" : ", ") + n;
    // Without a close match the likeliest cause is a plugin's layer without its plugin.
    fail("{}: {} = \"{}\" is not a registered layer{}: the {} slot takes layers of kind {}: {}{}",
         where, spec.layer_key, name,
         hint.empty() ? "" : fmt::format(" (did you mean \"{}\"?)", hint), spec.slot,
         layer_kind_name(spec.kind), list,
         hint.empty() ? " (a plugin's layer needs --plugin PATH or runtime.plugins)" : "");
  }
}

// The folder a path given at `where` is relative to: the config file's, or the current
// directory for a --set.
fs::path path_base(const Config& config, const std::string& where) {
  return where.starts_with("--set ") ? fs::path() : fs::path(config.source).parent_path();
}

// Makes runtime.plugins absolute from the config file's folder (or the current directory, for
// a --set); the config keeps the absolute paths. With a loader, hands each to it, so that their
// layers and tasks are registered before the slots and the task are checked.
void resolve_plugins(Config& config, const PluginLoader& load_plugin) {
  const std::string where = config.where("runtime.plugins");
  const fs::path base = path_base(config, where);
  for (size_t i = 0; i < config.runtime.plugins.size(); ++i) {
    std::string& plugin = config.runtime.plugins[i];
    try {
      plugin = absolute_normal_path(base / plugin).string();
      if (load_plugin) load_plugin(plugin);
    } catch (const Error& e) {
      fail("{}: runtime.plugins[{}]: {}", where, i, e.what());
    }
  }
}

// The task's options from the file and the overrides, read by the task itself: an unknown name
// or key, a wrong type or value is an error naming the task.* key. The config keeps what the
// task read, defaults filled.
void resolve_task(const Collected& collected, const std::vector<Override>& overrides,
                  Config& config) {
  TaskConfig& task = config.task;
  task.options = collected.task_options;
  for (const auto& [key, value] : task.options) config.origins["task." + key] = value.where;
  for (const auto& o : overrides) {
    if (!is_task_option(o.key)) continue;
    OptionValue v = to_option_value(*o.holder.get("value"), o.where);
    v.where = o.where;
    task.options.set(o.key.substr(5), std::move(v));
    config.origins[o.key] = o.where;
  }
  if (!has_task(task.name)) fail_unknown_task(task.name, config.where("task.name"));
  // A task's data files (keys named *_file, as the conllu task's train_file) are relative to the
  // config file's folder (to the current directory in a --set), as runtime.plugins; the config
  // keeps them absolute.
  std::vector<std::pair<std::string, OptionValue>> files;
  for (const auto& [key, value] : task.options) {
    const std::string* given = std::get_if<std::string>(&value.data);
    if (!key.ends_with("_file") || !given || given->empty()) continue;
    OptionValue absolute = value;
    absolute.data = absolute_normal_path(path_base(config, value.where) / *given).string();
    files.emplace_back(key, std::move(absolute));
  }
  for (auto& [key, value] : files) task.options.set(key, std::move(value));
  TaskBuild b = build_task(task);
  if (!b.unknown.empty()) {
    const OptionValue& v = *task.options.find(b.unknown[0]);
    std::vector<std::string> known;
    for (const auto& k : b.known) known.push_back("task." + k);
    unknown_key(v.key_where.empty() ? v.where : v.key_where, "task", b.unknown[0], known);
  }
  task.options = std::move(b.resolved);
}

Config resolve(toml::table& root, std::string_view source,
               std::span<const std::string> override_args,
               std::span<const std::string> override_origins, const PluginLoader& load_plugin) {
  Collected collected;
  collect(root, source, collected);
  std::vector<Override> overrides;
  for (size_t i = 0; i < override_args.size(); ++i)
    overrides.push_back(parse_override(
        override_args[i], i < override_origins.size() ? override_origins[i] : std::string()));
  Config config;
  config.source = std::string(source);
  for (const Override& o : overrides) config.overrides.push_back(o.where);
  const std::map<std::string, std::string> file_layers = file_layer_names(collected);
  const std::map<std::string, std::string> file_names = file_optim_names(collected);
  std::vector<Entry>& entries = collected.entries;
  for (const auto& o : overrides) {
    const KeySpec* spec = find_key(o.key);
    if (!spec) continue;  // a layer's or the task's option
    std::erase_if(entries, [&](const Entry& x) { return x.spec == spec; });
    entries.push_back({spec, o.holder.get("value"), o.where});
  }
  // runtime.plugins first: task.name's choices include the tasks the plugins register.
  std::stable_partition(entries.begin(), entries.end(),
                        [](const Entry& e) { return e.spec->key == "runtime.plugins"; });
  for (const Entry& e : entries) {
    const KeySpec spec = checked_spec(*e.spec);
    const ConfigValue value = convert(spec, *e.node, e.where);
    check_registered_name(spec, value, e.where);
    check_value(spec, value, e.where);
    e.spec->set(config, value);
    config.origins[e.spec->key] = e.where;
    if (e.spec->key == "runtime.plugins") resolve_plugins(config, load_plugin);
  }
  resolve_option_tables(collected, overrides, file_layers, config);
  resolve_optim_tables(collected, overrides, file_names, config);
  for (const auto& spec : config_keys())
    if (spec.required && !config.origins.contains(spec.key))
      fail("{}: {} is required (e.g. name = \"dependency\" under [task]); expected {}", source,
           spec.key, expected_text(checked_spec(spec)));
  resolve_task(collected, overrides, config);
  check_layer_names(config);
  validate_config(config);
  return config;
}

}  // namespace

Config parse_config(std::string_view toml_text, std::string_view source_name,
                    std::span<const std::string> overrides,
                    std::span<const std::string> override_origins,
                    const PluginLoader& load_plugin) {
  toml::table root;
  try {
    root = toml::parse(toml_text, source_name);
  } catch (const toml::parse_error& e) {
    fail("{}: invalid TOML: {}", position(e.source(), source_name), e.description());
  }
  return resolve(root, source_name, overrides, override_origins, load_plugin);
}

Config load_config(const std::filesystem::path& file, std::span<const std::string> overrides,
                   std::span<const std::string> override_origins, const PluginLoader& load_plugin) {
  // Bounded: a config is a small text file, and /dev/zero or a huge file must not exhaust memory.
  constexpr uint64_t kMaxConfigBytes = uint64_t{16} << 20;
  return parse_config(read_input_file(file, kMaxConfigBytes, "config file"), file.string(),
                      overrides, override_origins, load_plugin);
}

Config load_run_config(const std::filesystem::path& file, std::span<const std::string> overrides) {
  constexpr uint64_t kMaxConfigBytes = uint64_t{16} << 20;
  return parse_config(read_file(file, kMaxConfigBytes), file.string(), overrides);
}

}  // namespace headlab
