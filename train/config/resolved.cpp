// The resolved config written back: to_toml (every key, defaults filled, in schema order), its
// hash, and the differences between two configs.

#include <algorithm>
#include <cctype>
#include <optional>

#include <fmt/format.h>

#include "core/error.h"
#include "layers/encoder_layer.h"
#include "layers/option_schema.h"
#include "train/config/config.h"
#include "train/config/optim_tables.h"
#include "train/config/schema.h"
#include "train/tasks/registry.h"

namespace headlab {
namespace {

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
    const std::string a = format_entries(saved.model.*t.member);
    const std::string b = format_entries(current.model.*t.member);
    if (a != b)
      out.push_back(fmt::format("[{}]: {{{}}} (checkpoint) vs {{{}}} (config)", t.key,
                                a.empty() ? "" : a.substr(0, a.size() - 1),
                                b.empty() ? "" : b.substr(0, b.size() - 1)));
  }
  if (!shape_only) optim_table_differences(saved, current, out);
  return out;
}

// The layer options of slot `t` with defaults filled in (the layer is built once to learn
// them), or nullopt when the layer cannot be built from them.
std::optional<OptionMap> slot_options(const Config& c, const OptionTableSpec& t) {
  EncoderLayerOptions lo;
  lo.d_model = c.model.d_model;
  lo.heads = c.model.heads;
  lo.head_dim = c.model.head_dim;
  lo.d_ff = c.model.d_ff;
  try {
    lo.activation = parse_activation(c.model.activation, "model.activation");
    lo.attn_dropout = static_cast<float>(c.model.attn_dropout);
    lo.init = parse_init(c.model.init, "model.init");
    const std::string layer = std::get<std::string>(find_key(t.layer_key)->get(c));
    return resolved_layer_options({layer, c.model.*t.member}, inherited_slot_options(lo));
  } catch (const Error&) {
    return std::nullopt;
  }
}

// The options of the slots' own tables that differ between the two configs, defaults filled
// in: spelling out a layer's default is no change.
void option_table_differences(const Config& saved, const Config& current,
                              std::vector<std::string>& out) {
  for (const auto& t : option_tables()) {
    const OptionMap& a = saved.model.*t.member;
    const OptionMap& b = current.model.*t.member;
    if (format_entries(a) == format_entries(b)) continue;
    const std::optional<OptionMap> ra = slot_options(saved, t), rb = slot_options(current, t);
    std::vector<std::string> keys;
    for (const auto& [key, value] : a) keys.push_back(key);
    for (const auto& [key, value] : b)
      if (!a.contains(key)) keys.push_back(key);
    for (const std::string& key : keys) {
      const OptionValue *va = ra ? ra->find(key) : a.find(key),
                        *vb = rb ? rb->find(key) : b.find(key);
      const std::string sa = va ? format_value(*va) : "(none)",
                        sb = vb ? format_value(*vb) : "(none)";
      if (sa == sb) continue;
      auto shown = [&](const OptionMap& own, const std::string& resolved) {
        const OptionValue* v = own.find(key);
        return v ? format_value(*v) : resolved + " (default)";
      };
      out.push_back(fmt::format("{}.{}: {} (checkpoint) vs {} (config)", t.key, key, shown(a, sa),
                                shown(b, sb)));
    }
  }
}

}  // namespace

int64_t global_batch(const Config& c, int64_t ranks) {
  return c.train.batch_size * c.train.grad_accum * ranks;
}

std::vector<std::string> identity_differences(const Config& saved, const Config& current,
                                              ConfigUse use, int64_t saved_ranks, int64_t ranks) {
  std::vector<std::string> out;
  std::vector<std::string> batch_keys;
  for (const auto& spec : config_keys()) {
    const std::string a = format_value(spec.get(saved)), b = format_value(spec.get(current));
    if (spec.key == "task.name" && a == b) task_differences(saved, current, false, out);
    if (a == b) continue;
    const std::string diff = fmt::format("{}: {} (checkpoint) vs {} (config)", spec.key, a, b);
    switch (spec.identity) {
      case KeyClass::result:
        out.push_back(diff);
        break;
      case KeyClass::eval:
        if (use == ConfigUse::resume) out.push_back(diff);
        break;
      case KeyClass::batch:
        batch_keys.push_back(diff);
        break;
      case KeyClass::steps:
      case KeyClass::cadence:
      case KeyClass::runtime:
        break;
    }
  }
  if (global_batch(saved, saved_ranks) != global_batch(current, ranks)) {
    std::string parts;
    for (const std::string& d : batch_keys) parts += (parts.empty() ? "" : ", ") + d;
    if (saved_ranks != ranks)
      parts += fmt::format("{}ranks: {} (checkpoint) vs {}", parts.empty() ? "" : ", ", saved_ranks,
                           ranks);
    out.push_back(fmt::format("the global batch: {} (checkpoint) vs {} (config) ({})",
                              global_batch(saved, saved_ranks), global_batch(current, ranks),
                              parts));
  }
  option_table_differences(saved, current, out);
  optim_table_differences(saved, current, out);  // resolved, so a spelled-out default is no change
  return out;
}

std::string Config::where(const std::string& key) const {
  auto it = origins.find(key);
  return it != origins.end() ? it->second : source;
}

namespace {

std::string toml_values(const Config& config) {
  std::string out;
  std::string table;
  auto close_table = [&] {
    out += optim_tables_toml(config, table);
    if (table != "model") return;
    for (const auto& t : option_tables())
      if (const std::string text = format_entries(config.model.*t.member); !text.empty())
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
    if (spec.key == "task.name") out += format_entries(config.task.options);
  }
  close_table();
  return out;
}

}  // namespace

std::string to_toml(const Config& config) {
  std::string out = "# headlab resolved config: every key, defaults filled in.\n";
  for (const std::string& o : config.overrides) out += "# override: " + o + "\n";
  return out + toml_values(config);
}

std::string config_hash(const Config& config) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c :
       "# headlab resolved config: every key, defaults filled in.\n" + toml_values(config)) {
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
