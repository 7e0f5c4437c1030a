#include "train/tasks/registry.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "core/error.h"
#include "train/tasks/conllu.h"
#include "train/tasks/dependency.h"
#include "train/tasks/induction.h"
#include "train/tasks/jsonl.h"

namespace headlab {
namespace {

struct TaskKind {
  TaskFactory make;
  bool builtin = false;
};
using Registry = std::map<std::string, TaskKind, std::less<>>;

// Built-ins are listed here rather than registered statically, as in layers/registry.cpp.
Registry& registry() {
  static Registry r = {{"dependency", {make_dependency_task, true}},
                       {"conllu", {make_conllu_task, true}},
                       {"jsonl", {make_jsonl_task, true}},
                       {"induction", {make_induction_task, true}}};
  return r;
}

std::string prefix(const std::string& where) {
  return where.empty() ? "" : where + ": ";
}

}  // namespace

TaskOptions::TaskOptions(std::string task, const OptionMap& given)
    : task_(std::move(task)), given_(given) {}

TypedValue TaskOptions::get(const std::string& key, TypedValue fallback, const OptionSpec& spec) {
  reads_.push_back({key, spec, fallback});
  const OptionValue* given = given_.find(key);
  if (!given) {
    resolved_.set(key, option_value(fallback));
    return fallback;
  }
  const std::string dotted = "task." + key;
  TypedValue value = convert_option(dotted, spec, *given);
  // The default is always accepted, so that a resolved config reads back even where the default
  // stands for "none" outside the spec (the conllu task's eval_file = "").
  if (value != fallback) check_option(dotted, spec, value, given->where);
  OptionValue kept = option_value(value);  // as converted: 2 given for a number reads 2.0
  kept.where = given->where;
  kept.key_where = given->key_where;
  resolved_.set(key, std::move(kept));
  return value;
}

int64_t TaskOptions::get_int(const std::string& key, int64_t fallback, const OptionSpec& spec) {
  HEADLAB_ASSERT(spec.type == OptionType::integer);
  return std::get<int64_t>(get(key, fallback, spec));
}

double TaskOptions::get_real(const std::string& key, double fallback, const OptionSpec& spec) {
  HEADLAB_ASSERT(spec.type == OptionType::real);
  return std::get<double>(get(key, fallback, spec));
}

bool TaskOptions::get_bool(const std::string& key, bool fallback, const OptionSpec& spec) {
  HEADLAB_ASSERT(spec.type == OptionType::boolean);
  return std::get<bool>(get(key, fallback, spec));
}

std::string TaskOptions::get_string(const std::string& key, std::string fallback,
                                    const OptionSpec& spec) {
  HEADLAB_ASSERT(spec.type == OptionType::string);
  return std::get<std::string>(get(key, std::move(fallback), spec));
}

std::vector<std::string> TaskOptions::get_strings(const std::string& key,
                                                  std::vector<std::string> fallback,
                                                  const OptionSpec& spec) {
  HEADLAB_ASSERT(spec.type == OptionType::string_array);
  return std::get<std::vector<std::string>>(get(key, std::move(fallback), spec));
}

std::vector<std::string> TaskOptions::unknown() const {
  std::vector<std::string> out;
  for (const auto& [key, value] : given_)
    if (!resolved_.contains(key)) out.push_back(key);
  return out;
}

void TaskOptions::check_all_used() const {
  const std::vector<std::string> keys = unknown();
  if (keys.empty()) return;
  const OptionValue& v = *given_.find(keys[0]);
  std::vector<std::string> known;
  for (const Read& r : reads_) known.push_back(r.key);
  const std::string hint = closest_match(keys[0], known);
  fail("{}unknown key task.{}{}", prefix(v.key_where.empty() ? v.where : v.key_where), keys[0],
       hint.empty() ? "" : fmt::format(" (did you mean task.{}?)", hint));
}

void register_task(std::string name, TaskFactory factory) {
  if (name.empty()) fail("register_task: the name is empty");
  if (!factory) fail("register_task: the factory for '{}' is empty", name);
  auto [it, inserted] = registry().emplace(name, TaskKind{std::move(factory), false});
  if (!inserted) fail("register_task: a task named '{}' is already registered", name);
}

TaskRegistrar::TaskRegistrar(std::string name, TaskFactory factory) {
  register_task(std::move(name), std::move(factory));
}

void unregister_task(std::string_view name) {
  auto it = registry().find(name);
  if (it == registry().end()) return;
  if (it->second.builtin) fail("unregister_task: '{}' is a built-in task", name);
  registry().erase(it);
}

bool has_task(std::string_view name) {
  return registry().find(name) != registry().end();
}

std::vector<std::string> registered_tasks() {
  std::vector<std::string> names;
  for (const auto& entry : registry()) names.push_back(entry.first);
  return names;
}

std::vector<std::string> builtin_tasks() {
  std::vector<std::string> names;
  for (const auto& [name, kind] : registry())
    if (kind.builtin) names.push_back(name);
  return names;
}

void fail_unknown_task(std::string_view name, const std::string& where) {
  const std::vector<std::string> known = registered_tasks();
  std::string list;
  for (const auto& n : known) list += (list.empty() ? "" : ", ") + format_value(TypedValue(n));
  const std::string hint = closest_match(name, known);
  fail("{}task.name = {} is not one of {}{}", prefix(where),
       format_value(TypedValue(std::string(name))), list,
       hint.empty() ? "" : fmt::format(" (did you mean \"{}\"?)", hint));
}

namespace {

std::unique_ptr<Task> run_factory(const std::string& name, TaskOptions& reader) {
  auto it = registry().find(name);
  if (it == registry().end()) fail_unknown_task(name, "");
  std::unique_ptr<Task> task = it->second.make(reader);
  if (!task) fail("task '{}': the factory returned null", name);
  return task;
}

}  // namespace

TaskBuild build_task(const TaskConfig& config) {
  TaskOptions reader(config.name, config.options);
  TaskBuild b;
  b.task = run_factory(config.name, reader);
  b.resolved = reader.resolved();
  for (const TaskOptions::Read& r : reader.reads()) b.known.push_back(r.key);
  b.unknown = reader.unknown();
  return b;
}

std::unique_ptr<Task> make_task(const TaskConfig& config) {
  TaskOptions reader(config.name, config.options);
  std::unique_ptr<Task> task = run_factory(config.name, reader);
  reader.check_all_used();
  return task;
}

std::vector<TaskOptions::Read> describe_task(std::string_view name) {
  const OptionMap none;
  TaskOptions reader(std::string(name), none);
  run_factory(std::string(name), reader);
  return reader.reads();
}

}  // namespace headlab
