#pragma once
// PositionalEncoding: adds a position vector to each time step.
//   forward(x [B, T, D]) -> x + P[:T]   (P [max_len, D], broadcast over B)
// kind "sinusoidal" (Vaswani et al. 2017, sec. 3.5): P[p, 2i] = sin(p / 10000^(2i/D)),
// P[p, 2i+1] = cos(p / 10000^(2i/D)); a constant, not a parameter.
// kind "learned": parameter "weight" [max_len, D] initialised N(0, init_std).
// Throws headlab::Error when x is not [B, T, D] with T <= max_len.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/rng.h"
#include "layers/module.h"

namespace headlab {

class LayerOptions;

enum class PositionKind { learned, sinusoidal };
// "learned" or "sinusoidal"; throws naming `what` otherwise.
PositionKind parse_position_kind(std::string_view name, std::string_view what);

struct PositionalEncodingOptions {
  int64_t max_len = 0;
  int64_t d_model = 0;
  PositionKind kind = PositionKind::learned;
  float init_std = 1.0f;
};

class PositionalEncoding : public SequenceLayer {
 public:
  PositionalEncoding(const PositionalEncodingOptions& options, Rng& rng);
  Var forward(const Var& x) override;
  // max_len * d_model when learned, else 0.
  static int64_t parameter_count(const PositionalEncodingOptions& options);

  const PositionalEncodingOptions& options() const { return options_; }
  // The learned table (undefined for sinusoidal).
  Var weight;
  // The table actually added, [max_len, D] (aliases weight's value when learned).
  const Tensor& table() const;

 private:
  PositionalEncodingOptions options_;
  Tensor sinusoid_;
  std::vector<int32_t> positions_;  // 0..max_len-1, the ids gathered from the learned table
};

// Registry factory "positional_encoding": keys d_model, max_len, kind, init_std; and its
// parameter counter.
std::shared_ptr<SequenceLayer> make_positional_encoding_layer(LayerOptions& options);
int64_t count_positional_encoding_parameters(LayerOptions& options);

}  // namespace headlab
