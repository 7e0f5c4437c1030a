#include "optim/schedule_registry.h"

#include <map>
#include <mutex>
#include <set>

#include "core/error.h"

namespace headlab {

namespace {

using Table = std::map<std::string, ScheduleDefinition, std::less<>>;

// The built-ins, through the same factories a registered schedule has: their arithmetic stays
// in Schedule's named constructors, so their values are unchanged bit for bit.
Table builtins() {
  Table t;
  t["constant"] = {
      [](const ScheduleOptions& o, double lr) { return Schedule::constant(lr, o.warmup_steps); },
      {},
      true};
  t["warmup_inverse_sqrt"] = {[](const ScheduleOptions& o, double lr) {
                                return Schedule::warmup_inverse_sqrt(lr, o.warmup_steps, o.d_model);
                              },
                              {},
                              true};
  t["warmup_cosine"] = {[](const ScheduleOptions& o, double lr) {
                          return Schedule::warmup_cosine(lr, o.warmup_steps, o.total_steps,
                                                         o.min_lr);
                        },
                        {},
                        true};
  return t;
}

// Function-local, so registrations from static initialisers in other files find it built.
Table& table() {
  static Table schedules = builtins();
  return schedules;
}

std::mutex& table_mutex() {
  static std::mutex m;
  return m;
}

bool find_schedule_definition_builtin(std::string_view name) {
  std::lock_guard lock(table_mutex());
  auto it = table().find(name);
  return it != table().end() && it->second.builtin;
}

}  // namespace

void register_schedule(std::string name, ScheduleFactory factory, DeclaredOptions options) {
  if (name.empty()) fail("schedule registry: the name is empty");
  if (!factory) fail("schedule registry: the factory for \"{}\" is empty", name);
  std::set<std::string> keys;
  for (const DeclaredOption& o : options)
    if (!keys.insert(o.key).second)
      fail("schedule registry: \"{}\" declares option '{}' twice", name, o.key);
  std::lock_guard lock(table_mutex());
  if (auto it = table().find(name); it != table().end())
    fail("schedule registry: \"{}\" is {}", name,
         it->second.builtin ? "a built-in schedule" : "already registered");
  table().emplace(std::move(name), ScheduleDefinition{std::move(factory), std::move(options)});
}

void unregister_schedule(std::string_view name) {
  std::lock_guard lock(table_mutex());
  auto it = table().find(name);
  if (it == table().end()) return;
  if (it->second.builtin)
    fail("schedule registry: \"{}\" is a built-in schedule and cannot be removed", name);
  table().erase(it);
}

bool has_schedule(std::string_view name) {
  std::lock_guard lock(table_mutex());
  return table().find(name) != table().end();
}

std::vector<std::string> registered_schedules() {
  std::lock_guard lock(table_mutex());
  std::vector<std::string> names;
  for (const auto& [name, definition] : table()) names.push_back(name);
  return names;
}

ScheduleDefinition find_schedule(std::string_view name) {
  {
    std::lock_guard lock(table_mutex());
    if (auto it = table().find(name); it != table().end()) return it->second;
  }
  // The built-ins first, in the order the documentation gives them, then the registered names.
  std::string known = "constant, warmup_inverse_sqrt, warmup_cosine";
  for (const std::string& n : registered_schedules())
    if (!find_schedule_definition_builtin(n)) known += ", " + n;
  fail("schedule: name is \"{}\" but expected one of: {}", name, known);
}

}  // namespace headlab
