// A plugin that registers from a static initializer, at dlopen time, outside the transaction.
#include "train/plugins/plugin.h"

namespace {
std::shared_ptr<headlab::SequenceLayer> none(headlab::LayerOptions&) {
  return nullptr;
}
const headlab::LayerRegistrar static_registrar("test_static_layer", headlab::LayerKind::norm, none);
}  // namespace

HEADLAB_PLUGIN(registry) {
  (void)registry;
}
