#pragma once
// The gradcheck cases of every layer (kind "layer"): input and parameter gradients of Linear,
// Embedding, PositionalEncoding, LayerNorm, Dropout, FeedForward, Softmax, MultiHeadAttention
// (self, cross with padding and causal masks, the head gate, attention dropout), EncoderLayer
// (pre and post), a tiny Encoder, a parameter shared by two layers, and the cases each
// registered layer declares, or one generic case (built through the registry with small
// inherited options, so a user's registered layer is covered too). Inputs are small and drawn from the case's seed. Cases with
// dropout re-seed its Rng inside f so f stays deterministic; composite cases use GELU, since
// ReLU's kink can fall within eps of a hidden unit.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "layers/module.h"

namespace headlab {

std::vector<GradcheckCase> layer_gradcheck_cases();

// Each registered layer's declared cases (layer_check_cases, layers/registry.h; variant
// "registry: <its variant>"), or its one default case, in name order (also part of
// layer_gradcheck_cases).
std::vector<GradcheckCase> registry_gradcheck_cases();

// Gradchecks layer.forward on x [2, 3, d_model] drawn from `seed`, against x and every
// parameter. For use on a user's own SequenceLayer.
GradcheckResult gradcheck_sequence_layer(SequenceLayer& layer, int64_t d_model, uint64_t seed);

}  // namespace headlab
