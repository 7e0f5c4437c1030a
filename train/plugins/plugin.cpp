#include "train/plugins/plugin.h"

#include "core/error.h"

namespace headlab {

void PluginRegistry::add_layer(std::string name, LayerKind kind, LayerFactory factory,
                               LayerParameterCount count, std::vector<LayerCheckCase> checks) {
  if (name.empty()) fail("add_layer: the name is empty");
  if (!factory) fail("add_layer: the factory for '{}' is empty", name);
  layers_.push_back(
      {std::move(name), kind, std::move(factory), std::move(count), std::move(checks)});
}

void PluginRegistry::add_op(std::string name, OpFunction function, std::vector<OpCase> cases) {
  if (name.empty()) fail("add_op: the name is empty");
  if (!function) fail("add_op: the function of op '{}' is empty", name);
  if (cases.empty())
    fail("add_op: op '{}' has no gradcheck case (give several: shapes, dims, options)", name);
  ops_.push_back({std::move(name), std::move(function), std::move(cases)});
}

void PluginRegistry::add_task(std::string name, TaskFactory factory) {
  if (name.empty()) fail("add_task: the name is empty");
  if (!factory) fail("add_task: the factory for '{}' is empty", name);
  tasks_.push_back({std::move(name), std::move(factory)});
}

void PluginRegistry::add_optimizer(std::string name, OptimizerFactory factory, int state_tensors,
                                   DeclaredOptions options) {
  if (name.empty()) fail("add_optimizer: the name is empty");
  if (!factory) fail("add_optimizer: the factory for '{}' is empty", name);
  if (state_tensors < 0)
    fail("add_optimizer: '{}' declares {} state tensors per parameter but expected >= 0", name,
         state_tensors);
  optimizers_.push_back({std::move(name), std::move(factory), state_tensors, std::move(options)});
}

void PluginRegistry::add_schedule(std::string name, ScheduleFactory factory,
                                  DeclaredOptions options) {
  if (name.empty()) fail("add_schedule: the name is empty");
  if (!factory) fail("add_schedule: the factory for '{}' is empty", name);
  schedules_.push_back({std::move(name), std::move(factory), std::move(options)});
}

}  // namespace headlab
