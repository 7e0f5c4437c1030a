#include "optim/registry.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <set>

#include "core/error.h"

namespace headlab {

namespace {

constexpr std::string_view kBuiltins[] = {"adam", "adamw", "sgd"};

bool is_builtin(std::string_view name) {
  return std::find(std::begin(kBuiltins), std::end(kBuiltins), name) != std::end(kBuiltins);
}

// Function-local, so registrations from static initialisers in other files find it built.
std::map<std::string, OptimizerDefinition, std::less<>>& table() {
  static std::map<std::string, OptimizerDefinition, std::less<>> definitions;
  return definitions;
}

std::mutex& table_mutex() {
  static std::mutex m;
  return m;
}

}  // namespace

void register_optimizer(std::string name, OptimizerFactory factory, int state_tensors,
                        DeclaredOptions options) {
  if (name.empty()) fail("optimizer registry: the name is empty");
  if (!factory) fail("optimizer registry: the factory for \"{}\" is empty", name);
  if (is_builtin(name)) fail("optimizer registry: \"{}\" is a built-in optimizer", name);
  if (state_tensors < kUndeclaredStateTensors)
    fail("optimizer registry: \"{}\" declares {} state tensors per parameter but expected >= 0",
         name, state_tensors);
  std::set<std::string> keys;
  for (const DeclaredOption& o : options)
    if (!keys.insert(o.key).second)
      fail("optimizer registry: \"{}\" declares option '{}' twice", name, o.key);
  std::lock_guard lock(table_mutex());
  if (table().count(name)) fail("optimizer registry: \"{}\" is already registered", name);
  table().emplace(std::move(name),
                  OptimizerDefinition{std::move(factory), state_tensors, std::move(options)});
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
  return it == table().end() ? nullptr : &it->second.factory;
}

OptimizerDefinition find_optimizer(std::string_view name) {
  std::lock_guard lock(table_mutex());
  auto it = table().find(name);
  return it == table().end() ? OptimizerDefinition{} : it->second;
}

void fail_unknown_optimizer(std::string_view name) {
  std::string known;
  for (const std::string& n : registered_optimizers()) known += (known.empty() ? "" : ", ") + n;
  fail("optimizer: name is \"{}\" but expected one of: {}", name, known);
}

DeclaredOptions optimizer_declared_options(std::string_view name) {
  if (is_builtin(name)) return {};
  OptimizerDefinition d = find_optimizer(name);
  if (!d.factory) fail_unknown_optimizer(name);
  return d.options;
}

int optimizer_state_tensors(const OptimizerOptions& options) {
  if (options.name == "adam" || options.name == "adamw") return 2;
  if (options.name == "sgd") return options.momentum > 0.0 ? 1 : 0;
  OptimizerDefinition d = find_optimizer(options.name);
  if (!d.factory) fail_unknown_optimizer(options.name);
  return d.state_tensors == kUndeclaredStateTensors ? 2 : d.state_tensors;
}

}  // namespace headlab
