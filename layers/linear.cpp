#include "layers/linear.h"

#include "autograd/ops.h"
#include "core/error.h"
#include "layers/registry.h"

namespace headlab {

Linear::Linear(const LinearOptions& options, Rng& rng) : options_(options) {
  if (options.in_features <= 0 || options.out_features <= 0)
    fail("linear: in_features ({}) and out_features ({}) must be positive", options.in_features,
         options.out_features);
  const Shape w_shape{options.out_features, options.in_features};
  if (options.init == Init::xavier_uniform) {
    weight = register_parameter(
        "weight",
        init_uniform(w_shape, xavier_bound(options.in_features, options.out_features), rng));
    if (options.bias) bias = register_parameter("bias", Tensor::zeros({options.out_features}));
  } else {
    const float bound = fan_in_bound(options.in_features);
    weight = register_parameter("weight", init_uniform(w_shape, bound, rng));
    if (options.bias)
      bias = register_parameter("bias", init_uniform({options.out_features}, bound, rng));
  }
}

Var Linear::forward(const Var& x) {
  if (x.rank() < 1 || x.size(-1) != options_.in_features)
    fail("linear: input shape {} has last dim {} but in_features is {}", x.shape().str(),
         x.rank() < 1 ? 0 : x.size(-1), options_.in_features);
  return headlab::linear(x, weight, bias);  // [.., in] @ [out, in]^T + b, bias in the epilogue
}

std::shared_ptr<SequenceLayer> make_linear_layer(LayerOptions& o) {
  LinearOptions opt;
  const int64_t d_model = o.get_int("d_model", 0);
  opt.in_features = o.get_int("in_features", d_model);
  opt.out_features = o.get_int("out_features", d_model);
  opt.bias = o.get_bool("bias", true);
  opt.init = parse_init(o.get_string("init", "default"), "linear");
  return std::make_shared<Linear>(opt, o.init_rng());
}

}  // namespace headlab
