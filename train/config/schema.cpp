#include "train/config/schema.h"

#include <cfloat>
#include <cmath>

#include <fmt/format.h>

#include "core/error.h"

#include "train/tasks/registry.h"

namespace headlab {
namespace {

// What changing the key means for a run (KeyClass): shown in the table.
const char* identity_text(KeyClass c) {
  switch (c) {
    case KeyClass::result:
      return "";
    case KeyClass::batch:
      return "; the global batch: fixed for a run";
    case KeyClass::steps:
      return "; --resume may extend it";
    case KeyClass::cadence:
    case KeyClass::runtime:
      return "; may change on --resume";
    case KeyClass::eval:
      return "; eval may change it";
  }
  return "";
}

// `task`: the task whose key this is (a key such as task.relations means something else in each
// task that reads it), shown beside the key; empty for the other tables' keys.
std::string reference_row(const std::string& key, const OptionSpec& spec,
                          const std::string& default_text, KeyClass identity = KeyClass::result,
                          const std::string& task = "") {
  std::string allowed = expected_text(spec);
  if (spec.shape) allowed += "; shape-relevant";
  allowed += identity_text(identity);
  const std::string owner = task.empty() ? "" : fmt::format(" ({})", task);
  return fmt::format("| `{}`{} | {} | {} | {} | {} |\n", key, owner, option_type_name(spec.type),
                     default_text, allowed, spec.doc);
}

// The [task] rows: task.name, one of the library's tasks, then each task's own keys.
std::string task_rows(const KeySpec& name) {
  OptionSpec spec = name;
  spec.choices = builtin_tasks();
  std::string out = reference_row(name.key, spec, "*required*");
  for (const std::string& task : builtin_tasks())
    for (const TaskOptions::Read& r : describe_task(task))
      out += reference_row("task." + r.key, r.spec, fmt::format("`{}`", format_value(r.fallback)),
                           KeyClass::result, task);
  return out;
}

// The fp32 value a training run computes with.
void check_fp32(const KeySpec& spec, double v, const std::string& where) {
  const float f = static_cast<float>(v);
  const bool rounds_away = v != 0 && (f == 0 || std::fpclassify(f) == FP_SUBNORMAL);
  if (!rounds_away && std::isfinite(f)) return;
  const std::string prefix = where.empty() ? "" : where + ": ";
  fail("{}{} = {} {} in fp32: expected 0 or a magnitude in [{:.2g}, {:.2g}]", prefix, spec.key,
       format_value(ConfigValue(v)),
       !std::isfinite(f) ? "overflows to infinity"
       : f == 0          ? "rounds to 0"
                         : "is a denormal",
       static_cast<double>(FLT_MIN), static_cast<double>(FLT_MAX));
}

}  // namespace

void check_value(const KeySpec& spec, const ConfigValue& value, const std::string& where) {
  check_option(spec.key, spec, value, where);
  if (const double* v = std::get_if<double>(&value)) check_fp32(spec, *v, where);
  if (const auto* a = std::get_if<std::vector<double>>(&value))
    for (double v : *a) check_fp32(spec, v, where);
}

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
    out += reference_row(k.key, k, def, k.identity);
  }
  return out;
}

}  // namespace headlab
