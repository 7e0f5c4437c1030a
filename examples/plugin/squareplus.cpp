#include "squareplus.h"

#include <headlab/autograd/ops.h>

namespace example {

using headlab::Var;

Var squareplus(const Var& x, float b) {
  const Var b_const(headlab::Tensor::from({1}, {b}), false);  // broadcast over x
  return headlab::scale(headlab::add(x, headlab::sqrt(headlab::add(headlab::mul(x, x), b_const))),
                        0.5f);
}

Var squareplus_op(std::span<const Var> inputs, const headlab::OpCase& c) {
  return squareplus(inputs[0], static_cast<float>(c.option("b")));
}

std::vector<headlab::OpCase> squareplus_cases() {
  return {{"b = 4, [2, 3]", {{2, 3}}, {}, {{"b", 4.0}}},
          {"b = 0.5, [2, 2, 3]", {{2, 2, 3}}, {}, {{"b", 0.5}}},
          {"size-1 dims, inputs spread 3", {{1, 4, 1}}, {}, {{"b", 1.0}}, 3.0f}};
}

}  // namespace example
