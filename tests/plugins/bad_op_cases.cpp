// A plugin whose op has two gradcheck cases of one variant, after a valid layer: register_op
// refuses it while the loader commits, which must undo the layer too.
#include <span>

#include "autograd/ops.h"
#include "train/plugins/plugin.h"

HEADLAB_PLUGIN(registry) {
  registry.add_layer(
      "test_layer_before_op", headlab::LayerKind::norm,
      [](headlab::LayerOptions&) -> std::shared_ptr<headlab::SequenceLayer> { return nullptr; });
  const auto same = [](std::span<const headlab::Var> in, const headlab::OpCase&) { return in[0]; };
  registry.add_op("test_twin_cases", same, {{"plain", {{2}}}, {"plain", {{3}}}});
}
