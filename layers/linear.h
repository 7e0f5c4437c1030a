#pragma once
// Linear: y = x W^T + b, with W [out_features, in_features] (PyTorch's layout, so state dicts
// compare directly) and b [out_features].
//   x [.., in_features] -> y [.., out_features]
// Parameters: "weight", and "bias" when options.bias.
// Init (from the Rng passed in; weight then bias, row-major): Init::default_uniform draws both
// from U(-1/sqrt(in), 1/sqrt(in)) (PyTorch); Init::xavier_uniform draws the weight from
// U(-sqrt(6/(in+out)), +..) and sets the bias to 0.
// Throws headlab::Error when the input's last dim is not in_features.

#include <cstdint>
#include <memory>

#include "core/rng.h"
#include "layers/init.h"
#include "layers/module.h"

namespace headlab {

class LayerOptions;

struct LinearOptions {
  int64_t in_features = 0;
  int64_t out_features = 0;
  bool bias = true;
  Init init = Init::default_uniform;
};

class Linear : public SequenceLayer {
 public:
  Linear(const LinearOptions& options, Rng& rng);
  Var forward(const Var& x) override;

  const LinearOptions& options() const { return options_; }
  Var weight;
  Var bias;  // undefined without bias

 private:
  LinearOptions options_;
};

// Registry factory "linear": keys in_features, out_features (both default d_model), bias, init.
std::shared_ptr<SequenceLayer> make_linear_layer(LayerOptions& options);

}  // namespace headlab
