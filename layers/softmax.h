#pragma once
// Softmax over the last dim as a layer: x [.., N] -> [.., N], rows summing to 1. -inf entries
// get weight 0 and a fully -inf row gives zeros (never NaN), as the softmax op.

#include <memory>

#include "layers/module.h"

namespace headlab {

class LayerOptions;

class Softmax : public SequenceLayer {
 public:
  Var forward(const Var& x) override;
};

// Registry factory "softmax": no keys.
std::shared_ptr<SequenceLayer> make_softmax_layer(LayerOptions& options);

}  // namespace headlab
