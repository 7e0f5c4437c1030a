#include "layers/layer_norm.h"

#include "autograd/ops.h"
#include "core/error.h"
#include "layers/registry.h"

namespace headlab {

LayerNorm::LayerNorm(const LayerNormOptions& options) : options_(options) {
  if (options.dim <= 0) fail("layer_norm: dim is {} but must be positive", options.dim);
  if (!(options.eps > 0.0f)) fail("layer_norm: eps is {} but must be > 0", options.eps);
  if (options.affine) {
    weight = register_parameter("weight", Tensor::full({options.dim}, 1.0f));
    bias = register_parameter("bias", Tensor::zeros({options.dim}));
  }
}

Var LayerNorm::forward(const Var& x) {
  if (x.rank() < 1 || x.size(-1) != options_.dim)
    fail("layer_norm: input shape {} has last dim {} but dim is {}", x.shape().str(),
         x.rank() < 1 ? 0 : x.size(-1), options_.dim);
  return layer_norm(x, weight, bias, options_.eps);
}

Var LayerNorm::forward_sum(const Var& x, const Var& r) {
  if (x.shape() == r.shape() && x.rank() >= 1 && x.size(-1) == options_.dim)
    return add_layer_norm(x, r, weight, bias, options_.eps);
  return forward(add(x, r));
}

int64_t LayerNorm::parameter_count(const LayerNormOptions& options) {
  return options.affine ? 2 * options.dim : 0;
}

namespace {

LayerNormOptions read_options(LayerOptions& o) {
  LayerNormOptions opt;
  opt.dim = o.require_int("d_model");
  opt.eps = o.get_float("eps", 1e-5f);
  opt.affine = o.get_bool("affine", true);
  return opt;
}

}  // namespace

std::shared_ptr<SequenceLayer> make_layer_norm_layer(LayerOptions& o) {
  return std::make_shared<LayerNorm>(read_options(o));
}

int64_t count_layer_norm_parameters(LayerOptions& o) {
  return LayerNorm::parameter_count(read_options(o));
}

}  // namespace headlab
