#include "train/config/optim_tables.h"

#include <limits>

#include "core/error.h"
#include "layers/option_schema.h"
#include "optim/declared_options.h"
#include "optim/registry.h"
#include "optim/schedule_registry.h"

namespace headlab {

namespace {

std::string quoted_list(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "\"" : ", \"") + n + "\"";
  return out;
}

OptionMap lr_scale_map(const std::vector<LrScale>& scales) {
  OptionMap out;
  for (const LrScale& s : scales) out.set(s.pattern, s.scale);
  return out;
}

void differ(const std::string& table, const OptionMap& a, const OptionMap& b,
            std::vector<std::string>& out) {
  std::vector<std::string> keys;
  for (const auto& [key, value] : a) keys.push_back(key);
  for (const auto& [key, value] : b)
    if (!a.contains(key)) keys.push_back(key);
  for (const std::string& key : keys) {
    const OptionValue *va = a.find(key), *vb = b.find(key);
    const std::string sa = va ? format_value(*va) : "(none)",
                      sb = vb ? format_value(*vb) : "(none)";
    if (sa != sb)
      out.push_back(fmt::format("{}.{}: {} (checkpoint) vs {} (config)", table, key, sa, sb));
  }
}

}  // namespace

bool is_optim_table(std::string_view dotted) {
  return dotted == "optim.options" || dotted == "schedule.options" || dotted == "optim.lr_scale";
}

const char* optim_table_contents(std::string_view dotted) {
  if (dotted == "optim.options") return "optimizer options";
  if (dotted == "schedule.options") return "schedule options";
  return "learning-rate scales by parameter pattern";
}

void check_registered_name(const KeySpec& spec, const ConfigValue& value,
                           const std::string& where) {
  const bool optimizer = spec.key == "optim.name";
  if (!optimizer && spec.key != "schedule.name") return;
  const std::string* name = std::get_if<std::string>(&value);
  if (!name) return;  // convert() has refused other types
  if (optimizer ? has_optimizer(*name) : has_schedule(*name)) return;
  const std::vector<std::string> known =
      optimizer ? registered_optimizers() : registered_schedules();
  const std::string hint = closest_match(*name, known);
  const char* what = optimizer ? "optimizer" : "schedule";
  fail("{}: {} = \"{}\" is not one of the registered {}s {}{}", where, spec.key, *name, what,
       quoted_list(known),
       hint.empty() ? fmt::format(" (a plugin's {} needs --plugin PATH or runtime.plugins)", what)
                    : fmt::format(" (did you mean \"{}\"?)", hint));
}

void resolve_optim_tables(Config& config, const OptionMap& optim_options,
                          const OptionMap& schedule_options, const OptionMap& lr_scale) {
  config.optim.options = resolve_declared_options(
      "optim.options", optimizer_declared_options(config.optim.name), optim_options);
  config.schedule.options = resolve_declared_options(
      "schedule.options", find_schedule(config.schedule.name).options, schedule_options);
  const OptionSpec scale_spec =
      OptionSpec::real(0, std::numeric_limits<double>::infinity(), false, true);
  config.optim.lr_scale.clear();
  for (const auto& [pattern, value] : lr_scale) {
    const std::string key = "optim.lr_scale." + format_value(TypedValue(pattern));
    const TypedValue scale = convert_option(key, scale_spec, value);
    check_option(key, scale_spec, scale, value.where);
    config.optim.lr_scale.push_back({pattern, std::get<double>(scale)});
  }
}

std::string optim_tables_toml(const Config& config, std::string_view table) {
  std::string out;
  auto add = [&](const char* name, const OptionMap& options) {
    if (!options.empty()) out += fmt::format("\n[{}]\n{}", name, format_entries(options));
  };
  if (table == "optim") {
    add("optim.options", config.optim.options);
    add("optim.lr_scale", lr_scale_map(config.optim.lr_scale));
  } else if (table == "schedule") {
    add("schedule.options", config.schedule.options);
  }
  return out;
}

void optim_table_differences(const Config& saved, const Config& current,
                             std::vector<std::string>& out) {
  differ("optim.options", saved.optim.options, current.optim.options, out);
  differ("schedule.options", saved.schedule.options, current.schedule.options, out);
  differ("optim.lr_scale", lr_scale_map(saved.optim.lr_scale), lr_scale_map(current.optim.lr_scale),
         out);
}

}  // namespace headlab
