// A plugin that registers an op under a built-in op's name: refused, nothing kept.
#include <span>

#include "autograd/ops.h"
#include "train/plugins/plugin.h"

HEADLAB_PLUGIN(registry) {
  const auto same = [](std::span<const headlab::Var> in, const headlab::OpCase&) { return in[0]; };
  registry.add_op("test_fresh_op", same, {{"plain", {{2}}}});
  registry.add_op("softmax", same, {{"plain", {{2}}}});
}
