// A plugin that registers a new layer and then a built-in name: nothing may stay registered.
#include "train/plugins/plugin.h"

namespace {
std::shared_ptr<headlab::SequenceLayer> none(headlab::LayerOptions&) {
  return nullptr;
}
}  // namespace

HEADLAB_PLUGIN(registry) {
  registry.add_layer("test_fresh_layer", headlab::LayerKind::norm, none);
  registry.add_layer("layer_norm", headlab::LayerKind::norm, none);
}
