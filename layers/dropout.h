#pragma once
// Dropout (inverted): in training mode each element is zeroed with probability p and the rest
// are scaled by 1/(1-p); in eval mode, or with p = 0, the identity.
//   x [..] -> [..]
// Masks are drawn from a shared SampleRng (the encoder owns one), keyed by the sample each batch
// row holds (core/sample_rng.h), so the leading dim of x must be the batch dim.
// Throws headlab::Error when p is not in [0, 1).

#include <memory>

#include "core/sample_rng.h"
#include "layers/module.h"

namespace headlab {

class LayerOptions;

struct DropoutOptions {
  float p = 0.0f;
};

class Dropout : public SequenceLayer {
 public:
  // rng: where masks come from; null gives the layer its own SampleRng(0).
  explicit Dropout(const DropoutOptions& options, std::shared_ptr<SampleRng> rng = nullptr);
  Var forward(const Var& x) override;

  const DropoutOptions& options() const { return options_; }
  SampleRng& rng() { return *rng_; }

 private:
  DropoutOptions options_;
  std::shared_ptr<SampleRng> rng_;
};

// Throws "<what>: p is .. but must be in [0, 1)".
void check_dropout_p(float p, const char* what);

// Registry factory "dropout": key p.
std::shared_ptr<SequenceLayer> make_dropout_layer(LayerOptions& options);

}  // namespace headlab
