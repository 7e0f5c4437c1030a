#include "train/config/schema.h"

#include <fmt/format.h>

namespace headlab {

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
      {"model.attention_options", "model.attention_layer", &ModelConfig::attention_options},
      {"model.ffn_options", "model.ffn_layer", &ModelConfig::ffn_options},
      {"model.norm_options", "model.norm_layer", &ModelConfig::norm_options},
  };
  return tables;
}

std::string config_reference_markdown() {
  const Config defaults;
  std::string out = "| key | type | default | allowed | meaning |\n|---|---|---|---|---|\n";
  for (const auto& k : config_keys()) {
    const std::string def =
        k.required ? "*required*" : fmt::format("`{}`", format_value(k.get(defaults)));
    std::string allowed = expected_text(k);
    if (k.shape) allowed += "; shape-relevant";
    out += fmt::format("| `{}` | {} | {} | {} | {} |\n", k.key, option_type_name(k.type), def,
                       allowed, k.doc);
  }
  return out;
}

}  // namespace headlab
