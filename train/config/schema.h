#pragma once
// The config's key schema: one entry per dotted key, binding it to its member of Config with its
// type, allowed range or choices, whether it changes tensor shapes, and its documentation. The
// loader, the resolved-config writer, the hash, the shape comparison and configs/README.md's
// table all walk this one list; the default of each key is read from a default-constructed
// Config, so defaults are never repeated here.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "train/config/config.h"

namespace headlab {

using ConfigValue =
    std::variant<int64_t, double, bool, std::string, std::vector<double>, std::vector<std::string>>;

enum class KeyType { integer, real, boolean, string, real_array, string_array };

struct KeySpec {
  std::string key;  // dotted: "model.d_model"
  KeyType type = KeyType::integer;
  // Numbers (and array elements): lo <= v <= hi, with open ends where *_open.
  double lo = 0, hi = 0;
  bool lo_open = false, hi_open = false;
  // Arrays: allowed lengths.
  size_t min_len = 0, max_len = 0;
  // Strings (and string array elements): allowed values; empty means any non-empty string.
  std::vector<std::string> choices;
  bool shape = false;     // changes parameter or optimizer-state shapes
  bool required = false;  // no default (task.name)
  std::string doc;
  std::function<ConfigValue(const Config&)> get;
  std::function<void(Config&, const ConfigValue&)> set;
};

// All keys, grouped by table in the order [model], [task], [optim], [schedule], [train],
// [runtime].
const std::vector<KeySpec>& config_keys();
const KeySpec* find_key(std::string_view dotted);
// The table names ("model", "task", ...).
const std::vector<std::string>& config_tables();

// The layer slots' own option tables inside [model] ("model.norm_options"), their member of
// ModelConfig and the key naming the slot's layer ("model.norm_layer"). Their contents are
// free-form: the slot's layer factory reads and checks them when the model is built.
struct OptionTableSpec {
  std::string key;
  std::string layer_key;
  std::shared_ptr<const toml::table> ModelConfig::*member;
};
const std::vector<OptionTableSpec>& option_tables();

const char* key_type_name(KeyType type);
// "an integer in [1, 8192]", "a number in [0, 1)", "one of \"pre\", \"post\"", ...
std::string expected_text(const KeySpec& spec);
// Throws headlab::Error "<where>: <key> = <value> is out of range: expected ..." (or not one of
// the choices, with a did-you-mean) if `value` violates the spec. NaN/Inf are rejected here.
void check_value(const KeySpec& spec, const ConfigValue& value, const std::string& where);
// TOML spelling of a value: 64, 0.003, true, "pre", [0.9, 0.98], ["PREV", "HEAD"].
std::string format_value(const ConfigValue& value);

// Levenshtein distance; and the closest candidate within a small distance, or "".
size_t edit_distance(std::string_view a, std::string_view b);
std::string closest_match(std::string_view word, const std::vector<std::string>& candidates);

// The Markdown table of configs/README.md: key, type, default, range, meaning.
std::string config_reference_markdown();

}  // namespace headlab
