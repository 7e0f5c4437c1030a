// A plugin as a copy of headlab 0.2.0's headers with an edit would build it: the same version
// and plugin ABI, another header fingerprint (tests/plugins/CMakeLists.txt overrides
// HEADLAB_HEADERS_FINGERPRINT, as headlabConfig.cmake does with the hash of an edited copy).
#include "train/plugins/plugin.h"

HEADLAB_PLUGIN(registry) {
  registry.add_layer(
      "test_edited_headers_layer", headlab::LayerKind::norm,
      [](headlab::LayerOptions&) -> std::shared_ptr<headlab::SequenceLayer> { return nullptr; });
}
