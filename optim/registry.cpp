#include "optim/registry.h"

#include <algorithm>
#include <map>
#include <mutex>

#include "core/error.h"

namespace headlab {

namespace {

constexpr std::string_view kBuiltins[] = {"adam", "adamw", "sgd"};

bool is_builtin(std::string_view name) {
  return std::find(std::begin(kBuiltins), std::end(kBuiltins), name) != std::end(kBuiltins);
}

// Function-local, so registrations from static initialisers in other files find it built.
std::map<std::string, OptimizerFactory, std::less<>>& table() {
  static std::map<std::string, OptimizerFactory, std::less<>> factories;
  return factories;
}

std::mutex& table_mutex() {
  static std::mutex m;
  return m;
}

}  // namespace

void register_optimizer(std::string name, OptimizerFactory factory) {
  if (name.empty()) fail("optimizer registry: the name is empty");
  if (!factory) fail("optimizer registry: the factory for \"{}\" is empty", name);
  if (is_builtin(name)) fail("optimizer registry: \"{}\" is a built-in optimizer", name);
  std::lock_guard lock(table_mutex());
  if (table().count(name)) fail("optimizer registry: \"{}\" is already registered", name);
  table().emplace(std::move(name), std::move(factory));
}

void unregister_optimizer(std::string_view name) {
  if (is_builtin(name))
    fail("optimizer registry: \"{}\" is a built-in optimizer and cannot be removed", name);
  std::lock_guard lock(table_mutex());
  if (auto it = table().find(name); it != table().end()) table().erase(it);
}

bool has_optimizer(std::string_view name) {
  if (is_builtin(name)) return true;
  std::lock_guard lock(table_mutex());
  return table().find(name) != table().end();
}

std::vector<std::string> registered_optimizers() {
  std::vector<std::string> names(std::begin(kBuiltins), std::end(kBuiltins));
  {
    std::lock_guard lock(table_mutex());
    for (const auto& [name, factory] : table()) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

const OptimizerFactory* find_optimizer_factory(std::string_view name) {
  std::lock_guard lock(table_mutex());
  auto it = table().find(name);
  return it == table().end() ? nullptr : &it->second;
}

}  // namespace headlab
