#pragma once
// LayerNorm over the last dim (Ba et al. 2016), biased variance as in PyTorch:
//   y = (x - mean) / sqrt(var + eps) * weight + bias      x [.., D] -> [.., D]
// Parameters "weight" (gain, init 1) and "bias" (init 0), both [D], when options.affine.
// Throws headlab::Error when the input's last dim is not options.dim.

#include <cstdint>
#include <memory>

#include "layers/module.h"

namespace headlab {

class LayerOptions;

struct LayerNormOptions {
  int64_t dim = 0;
  float eps = 1e-5f;
  bool affine = true;
};

class LayerNorm : public SequenceLayer {
 public:
  explicit LayerNorm(const LayerNormOptions& options);
  Var forward(const Var& x) override;
  // norm(x + r) as one fused op (add_layer_norm) when x and r have the same shape.
  Var forward_sum(const Var& x, const Var& r) override;
  // 2 * dim with affine, else 0.
  static int64_t parameter_count(const LayerNormOptions& options);

  const LayerNormOptions& options() const { return options_; }
  Var weight;  // gain; undefined without affine
  Var bias;

 private:
  LayerNormOptions options_;
};

// Registry factory "layer_norm": keys d_model, eps, affine; and its parameter counter.
std::shared_ptr<SequenceLayer> make_layer_norm_layer(LayerOptions& options);
int64_t count_layer_norm_parameters(LayerOptions& options);

}  // namespace headlab
