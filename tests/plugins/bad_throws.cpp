// A plugin whose registration throws after it staged a layer: nothing may stay registered.
#include <stdexcept>

#include "train/plugins/plugin.h"

HEADLAB_PLUGIN(registry) {
  registry.add_layer(
      "test_half_registered", headlab::LayerKind::norm,
      [](headlab::LayerOptions&) -> std::shared_ptr<headlab::SequenceLayer> { return nullptr; });
  throw std::runtime_error("the plugin failed on purpose");
}
