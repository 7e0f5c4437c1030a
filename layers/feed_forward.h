#pragma once
// FeedForward (position-wise, Vaswani et al. 2017 eq. 2):
//   y = W2 act(W1 x + b1) + b2      x [.., d_model] -> [.., d_model], hidden [.., d_ff]
// act is ReLU or GELU (exact, erf). Optional dropout on the hidden activation (PyTorch's
// TransformerEncoderLayer has it; the paper does not): activation_dropout, default 0.
// Children "w1" (Linear d_model -> d_ff) and "w2" (Linear d_ff -> d_model), PyTorch init.
// Hook point (layers/hooks.h): hook_post, act(W1 x + b1) [.., d_ff], before the dropout.

#include <cstdint>
#include <memory>
#include <string_view>

#include "core/rng.h"
#include "core/sample_rng.h"
#include "layers/init.h"
#include "layers/linear.h"
#include "layers/module.h"

namespace headlab {

class LayerOptions;

enum class Activation { relu, gelu };
// "relu" or "gelu"; throws naming `what` otherwise.
Activation parse_activation(std::string_view name, std::string_view what);

struct FeedForwardOptions {
  int64_t d_model = 0;
  int64_t d_ff = 0;
  Activation activation = Activation::relu;
  float activation_dropout = 0.0f;
  bool bias = true;
  Init init = Init::default_uniform;
};

class FeedForward : public SequenceLayer {
 public:
  // dropout_rng: masks for activation_dropout; null gives the layer its own SampleRng(0).
  FeedForward(const FeedForwardOptions& options, Rng& rng,
              std::shared_ptr<SampleRng> dropout_rng = nullptr);
  Var forward(const Var& x) override;
  // w1 [d_ff, d_model] and w2 [d_model, d_ff], with their biases when options.bias.
  static int64_t parameter_count(const FeedForwardOptions& options);

  const FeedForwardOptions& options() const { return options_; }
  std::shared_ptr<Linear> w1;
  std::shared_ptr<Linear> w2;

 private:
  FeedForwardOptions options_;
  std::shared_ptr<SampleRng> dropout_rng_;
};

// Registry factory "feed_forward": keys d_model, d_ff, activation, activation_dropout, bias,
// init; and its parameter counter.
std::shared_ptr<SequenceLayer> make_feed_forward_layer(LayerOptions& options);
int64_t count_feed_forward_parameters(LayerOptions& options);

}  // namespace headlab
