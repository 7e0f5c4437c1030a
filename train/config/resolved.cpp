// The resolved config written back: to_toml (every key, defaults filled, in schema order), its
// hash, and the differences between two configs.

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "train/config/config.h"
#include "train/config/schema.h"
#include "train/tasks/registry.h"

namespace headlab {
namespace {

// "key = value" lines of an option table, keys quoted when they are not bare TOML keys.
std::string options_text(const OptionMap& options) {
  std::string out;
  for (const auto& [key, value] : options) {
    const bool bare = !key.empty() && std::all_of(key.begin(), key.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
    });
    out +=
        fmt::format("{} = {}\n", bare ? key : format_value(TypedValue(key)), format_value(value));
  }
  return out;
}

std::string text_of(const OptionMap& options, const std::string& key) {
  const OptionValue* v = options.find(key);
  return v ? format_value(*v) : "(none)";
}

// The task's options that differ ("task.colours: 4 (checkpoint) vs 8 (config)"), in the
// current task's order; with shape_only, those its spec marks as shape-relevant (every key of
// an unknown task).
void task_differences(const Config& saved, const Config& current, bool shape_only,
                      std::vector<std::string>& out) {
  std::vector<std::string> keys, shaped;
  for (const auto& [key, value] : current.task.options) keys.push_back(key);
  for (const auto& [key, value] : saved.task.options)
    if (!current.task.options.contains(key)) keys.push_back(key);
  if (shape_only && has_task(current.task.name))
    for (const TaskOptions::Read& r : describe_task(current.task.name))
      if (r.spec.shape) shaped.push_back(r.key);
  for (const std::string& key : keys) {
    if (shape_only && has_task(current.task.name) &&
        std::find(shaped.begin(), shaped.end(), key) == shaped.end())
      continue;
    const std::string a = text_of(saved.task.options, key), b = text_of(current.task.options, key);
    if (a != b) out.push_back(fmt::format("task.{}: {} (checkpoint) vs {} (config)", key, a, b));
  }
}

std::vector<std::string> differences(const Config& saved, const Config& current, bool shape_only) {
  std::vector<std::string> out;
  for (const auto& spec : config_keys()) {
    if (shape_only && !spec.shape) continue;
    const std::string a = format_value(spec.get(saved)), b = format_value(spec.get(current));
    if (a != b) out.push_back(fmt::format("{}: {} (checkpoint) vs {} (config)", spec.key, a, b));
    if (spec.key == "task.name") task_differences(saved, current, shape_only, out);
  }
  // Layer options can change shapes (a bias switched off), so they count as shape-relevant.
  for (const auto& t : option_tables()) {
    const std::string a = options_text(saved.model.*t.member);
    const std::string b = options_text(current.model.*t.member);
    if (a != b)
      out.push_back(fmt::format("[{}]: {{{}}} (checkpoint) vs {{{}}} (config)", t.key,
                                a.empty() ? "" : a.substr(0, a.size() - 1),
                                b.empty() ? "" : b.substr(0, b.size() - 1)));
  }
  return out;
}

}  // namespace

std::string Config::where(const std::string& key) const {
  auto it = origins.find(key);
  return it != origins.end() ? it->second : source;
}

std::string to_toml(const Config& config) {
  std::string out = "# headlab resolved config: every key, defaults filled in.\n";
  std::string table;
  auto close_table = [&] {
    if (table != "model") return;
    for (const auto& t : option_tables())
      if (const std::string text = options_text(config.model.*t.member); !text.empty())
        out += fmt::format("\n[{}]\n{}", t.key, text);
  };
  for (const auto& spec : config_keys()) {
    const size_t dot = spec.key.find('.');
    const std::string t = spec.key.substr(0, dot);
    if (t != table) {
      close_table();
      out += fmt::format("\n[{}]\n", t);
      table = t;
    }
    out += fmt::format("{} = {}\n", spec.key.substr(dot + 1), format_value(spec.get(config)));
    if (spec.key == "task.name") out += options_text(config.task.options);
  }
  close_table();
  return out;
}

std::string config_hash(const Config& config) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : to_toml(config)) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return fmt::format("{:016x}", h);
}

std::vector<std::string> shape_differences(const Config& saved, const Config& current) {
  return differences(saved, current, true);
}

std::vector<std::string> config_differences(const Config& saved, const Config& current) {
  return differences(saved, current, false);
}

}  // namespace headlab
