// The smallest plugin: one layer name. Whether it loads depends only on the headers it was
// compiled against (tests/install/edited_headers.cmake).
#include <headlab/train/plugins/plugin.h>

HEADLAB_PLUGIN(registry) {
  registry.add_layer(
      "edited_headers_layer", headlab::LayerKind::norm,
      [](headlab::LayerOptions&) -> std::shared_ptr<headlab::SequenceLayer> { return nullptr; });
}
