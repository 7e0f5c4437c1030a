#include "swiglu.h"

#include <headlab/autograd/ops.h>
#include <headlab/core/error.h>

namespace example {

using namespace headlab;

SwiGLU::SwiGLU(const SwiGLUOptions& options, Rng& rng) : options_(options) {
  if (options.d_model <= 0 || options.d_ff <= 0)
    fail("swiglu: d_model ({}) and d_ff ({}) must be positive", options.d_model, options.d_ff);
  w13 = register_module("w13",
                        std::make_shared<Linear>(
                            LinearOptions{options.d_model, 2 * options.d_ff, options.bias}, rng));
  w2 = register_module("w2", std::make_shared<Linear>(
                                 LinearOptions{options.d_ff, options.d_model, options.bias}, rng));
}

Var SwiGLU::forward(const Var& x) {
  const int64_t f = options_.d_ff;
  Var h = w13->forward(x);             // [B, T, 2 d_ff]
  Var gate = slice(h, -1, 0, f);       // x W1^T
  Var value = slice(h, -1, f, 2 * f);  // x W3^T
  return w2->forward(mul(mul(gate, sigmoid(gate)), value));
}

std::shared_ptr<SequenceLayer> make_swiglu(LayerOptions& o) {
  SwiGLUOptions opt;
  opt.d_model = o.require_int("d_model");
  opt.d_ff = o.require_int("d_ff");
  opt.bias = o.get_bool("bias", true);
  return std::make_shared<SwiGLU>(opt, o.init_rng());
}

int64_t count_swiglu_parameters(LayerOptions& o) {
  const int64_t d = o.require_int("d_model"), f = o.require_int("d_ff");
  const bool bias = o.get_bool("bias", true);
  return 2 * f * d + d * f + (bias ? 2 * f + d : 0);  // w13, w2 and their biases
}

}  // namespace example
