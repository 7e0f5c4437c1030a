#include "train/config/schema.h"

#include <fmt/format.h>

#include "train/tasks/registry.h"

namespace headlab {
namespace {

std::string reference_row(const std::string& key, const OptionSpec& spec,
                          const std::string& default_text) {
  std::string allowed = expected_text(spec);
  if (spec.shape) allowed += "; shape-relevant";
  return fmt::format("| `{}` | {} | {} | {} | {} |\n", key, option_type_name(spec.type),
                     default_text, allowed, spec.doc);
}

// The [task] rows: task.name, one of the library's tasks, then each task's own keys.
std::string task_rows(const KeySpec& name) {
  OptionSpec spec = name;
  spec.choices = builtin_tasks();
  std::string out = reference_row(name.key, spec, "*required*");
  for (const std::string& task : builtin_tasks())
    for (const TaskOptions::Read& r : describe_task(task))
      out += reference_row("task." + r.key, r.spec, fmt::format("`{}`", format_value(r.fallback)));
  return out;
}

}  // namespace

const KeySpec* find_key(std::string_view dotted) {
  for (const auto& k : config_keys())
    if (k.key == dotted) return &k;
  return nullptr;
}

const std::vector<std::string>& config_tables() {
  static const std::vector<std::string> tables = {"model",    "task",  "optim",
                                                  "schedule", "train", "runtime"};
  return tables;
}

const std::vector<OptionTableSpec>& option_tables() {
  static const std::vector<OptionTableSpec> tables = {
      {"model.attention_options", "model.attention_layer", &ModelConfig::attention_options,
       LayerKind::attention, "attention"},
      {"model.ffn_options", "model.ffn_layer", &ModelConfig::ffn_options, LayerKind::feed_forward,
       "ffn"},
      {"model.norm_options", "model.norm_layer", &ModelConfig::norm_options, LayerKind::norm,
       "norm"},
      {"model.positions_options", "model.positions_layer", &ModelConfig::positions_options,
       LayerKind::positions, "positions"},
  };
  return tables;
}

std::string config_reference_markdown() {
  const Config defaults;
  std::string out = "| key | type | default | allowed | meaning |\n|---|---|---|---|---|\n";
  for (const auto& k : config_keys()) {
    if (k.key == "task.name") {
      out += task_rows(k);
      continue;
    }
    const std::string def =
        k.required ? "*required*" : fmt::format("`{}`", format_value(k.get(defaults)));
    out += reference_row(k.key, k, def);
  }
  return out;
}

}  // namespace headlab
