#pragma once
// Named tensors: what a module's or an optimizer's state_dict() holds, and what a safetensors
// file stores. A plain list (registration order), so a file written from it is reproducible.

#include <string>
#include <vector>

#include "core/tensor.h"

namespace headlab {

struct NamedTensor {
  std::string name;
  Tensor tensor;
};
// Named tensors in registration order.
using StateDict = std::vector<NamedTensor>;

}  // namespace headlab
