#include "train/plugins/plugin.h"

#include "core/error.h"

namespace headlab {

void PluginRegistry::add_layer(std::string name, LayerKind kind, LayerFactory factory,
                               LayerParameterCount count) {
  if (name.empty()) fail("add_layer: the name is empty");
  if (!factory) fail("add_layer: the factory for '{}' is empty", name);
  layers_.push_back({std::move(name), kind, std::move(factory), std::move(count)});
}

void PluginRegistry::add_task(std::string name, TaskFactory factory) {
  if (name.empty()) fail("add_task: the name is empty");
  if (!factory) fail("add_task: the factory for '{}' is empty", name);
  tasks_.push_back({std::move(name), std::move(factory)});
}

}  // namespace headlab
