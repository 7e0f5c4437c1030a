#include "layers/softmax.h"

#include "autograd/ops.h"
#include "layers/registry.h"

namespace headlab {

Var Softmax::forward(const Var& x) {
  return softmax(x);
}

std::shared_ptr<SequenceLayer> make_softmax_layer(LayerOptions&) {
  return std::make_shared<Softmax>();
}

}  // namespace headlab
