#pragma once
// RMSNorm (Zhang & Sennrich 2019), a layer defined outside headlab:
//   y = x / sqrt(mean(x^2) + eps) * weight        x [.., D] -> [.., D], weight [D] (init 1)
// No mean subtraction and no bias, unlike LayerNorm. Registered as "rms_norm", so a config can
// put it in the encoder's norm slot: [model] norm_layer = "rms_norm".

#include <cstdint>
#include <memory>

#include "autograd/var.h"
#include "layers/module.h"
#include "layers/registry.h"

namespace custom {

// The op, with its backward (written like headlab's own ops, see autograd/ops_matmul.cpp).
// Throws headlab::Error when weight is not [D] for x [.., D].
headlab::Var rms_norm(const headlab::Var& x, const headlab::Var& weight, float eps);

struct RMSNormOptions {
  int64_t d_model = 0;
  float eps = 1e-6f;
};

class RMSNorm : public headlab::SequenceLayer {
 public:
  explicit RMSNorm(const RMSNormOptions& options);
  headlab::Var forward(const headlab::Var& x) override;

  headlab::Var weight;

 private:
  RMSNormOptions options_;
};

// Registry factory: keys d_model (inherited from the model), eps. And its parameter counter
// (d_model, the weight), which lets headlab's memory estimate count the layer without
// building it.
std::shared_ptr<headlab::SequenceLayer> make_rms_norm(headlab::LayerOptions& options);
int64_t count_rms_norm_parameters(headlab::LayerOptions& options);

}  // namespace custom
