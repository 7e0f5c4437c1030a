#pragma once
// The config's key schema: one entry per dotted key, binding it to its member of Config with its
// type, allowed range or choices, whether it changes tensor shapes, and its documentation. The
// loader, the resolved-config writer, the hash, the shape comparison and configs/README.md's
// table all walk this one list; the default of each key is read from a default-constructed
// Config, so defaults are never repeated here.

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "layers/option_schema.h"
#include "layers/registry.h"
#include "train/config/config.h"

namespace headlab {

using ConfigValue = TypedValue;
using KeyType = OptionType;

// What changing a key between a checkpoint and the config that resumes or evaluates it means
// (identity_differences in config.h). Each key has one class, set in keys.cpp.
enum class KeyClass {
  result,   // changes what training computes (model, task, optim, schedule, train.seed): fixed
  batch,    // a factor of the global batch: compared through global_batch(), not key by key,
            // so a run may split the same global batch differently (accumulation, ranks)
  steps,    // train.steps: a resumed run may be extended; eval ignores it
  cadence,  // logging, evaluation and checkpoint cadence, retention: may change
  eval,     // what an evaluation measures (train.eval_*): eval may change it, resume may not
  runtime,  // runtime.*: may change (a runtime key that changes results is declared result)
};

// What the key accepts (type, range, choices, shape, doc: OptionSpec) and where it lives.
struct KeySpec : OptionSpec {
  std::string key;        // dotted: "model.d_model"
  bool required = false;  // no default (task.name)
  KeyClass identity = KeyClass::result;
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
// ModelConfig, the key naming the slot's layer ("model.norm_layer"), the kind of layer the slot
// takes and the slot's name in messages ("norm"). The tables' contents are free-form: the
// slot's layer factory reads and checks them when the model is built.
struct OptionTableSpec {
  std::string key;
  std::string layer_key;
  OptionMap ModelConfig::*member;
  LayerKind kind;
  std::string slot;
};
const std::vector<OptionTableSpec>& option_tables();

// Throws headlab::Error "<where>: <key> = <value> is out of range: expected ..." (or not one of
// the choices, with a did-you-mean) if `value` violates the spec (check_option, with the key).
// Numbers must also be fp32 numbers: a value that rounds to infinity, or to zero or a denormal
// although it is not 0, is refused ("optim.eps = 1e-46 rounds to 0 in fp32: expected 0 or a
// magnitude in [1.2e-38, 3.4e+38]").
void check_value(const KeySpec& spec, const ConfigValue& value, const std::string& where);

// The Markdown table of configs/README.md: key, type, default, range, meaning.
std::string config_reference_markdown();

}  // namespace headlab
