#pragma once
// The config's optimizer and schedule tables: optim.name and schedule.name take registered
// names (optim/registry.h, optim/schedule_registry.h: the built-ins and a plugin's), the
// [optim.options] and [schedule.options] tables are checked against what the named optimizer
// and schedule declare, and [optim.lr_scale] maps parameter-name patterns to learning-rate
// scales (optim/param_groups.h).

#include <string>
#include <string_view>

#include "layers/options.h"
#include "train/config/config.h"
#include "train/config/schema.h"

namespace headlab {

// "optim.options", "schedule.options" and "optim.lr_scale".
bool is_optim_table(std::string_view dotted);
// What such a table holds, for messages: "optimizer options", ...
const char* optim_table_contents(std::string_view dotted);

// For optim.name and schedule.name: throws "<where>: optim.name = \"lion\" is not one of the
// registered optimizers \"adam\", ... (a plugin's optimizer needs --plugin PATH or
// runtime.plugins)" (with a did-you-mean when one is close) unless the name is registered.
// Other keys pass.
void check_registered_name(const KeySpec& spec, const ConfigValue& value, const std::string& where);

// Sets config.optim.options, config.schedule.options (each resolved against its declaration:
// every declared key, given or default) and config.optim.lr_scale from the tables as given.
// Throws headlab::Error naming the key, its position, expected and actual for an undeclared
// key, a wrong type or a value out of range.
void resolve_optim_tables(Config& config, const OptionMap& optim_options,
                          const OptionMap& schedule_options, const OptionMap& lr_scale);

// The tables as TOML, for the resolved config: "[optim.options]\nbeta1 = 0.9\n..." for the
// tables of `table` ("optim" or "schedule") that are not empty.
std::string optim_tables_toml(const Config& config, std::string_view table);
// "optim.options.beta1: 0.9 (checkpoint) vs 0.95 (config)", ... for each entry that differs.
void optim_table_differences(const Config& saved, const Config& current,
                             std::vector<std::string>& out);

}  // namespace headlab
