#pragma once
// Reading state written before MultiHeadAttention held its Q, K and V projections as one
// parameter. Until then an attention layer had three Linear children, w_q, w_k and w_v, each
// with a "weight" [h d, d_model] and (with bias) a "bias" [h d]; now it has in_proj_weight
// [3 h d, d_model] and in_proj_bias [3 h d], whose row blocks Q, K, V are exactly those three
// (the same values, drawn in the same order at construction). So an older state is read by
// stacking:
//
//   P + "w_q.weight", P + "w_k.weight", P + "w_v.weight"  ->  P + "in_proj_weight"  (rows Q, K, V)
//   P + "w_q.bias",   P + "w_k.bias",   P + "w_v.bias"    ->  P + "in_proj_bias"
//
// for any prefix P: a layer's path ("encoder.layers.0.attn.") in a model's state_dict, or an
// optimizer slot before it ("exp_avg.encoder.layers.0.attn.") in an optimizer's, whose
// per-element moments stack the same way. Module::load_state_dict and
// Optimizer::load_state_dict apply it, so old checkpoints resume, evaluate and analyze as before.

#include <functional>
#include <string>

#include "core/state_dict.h"

namespace headlab {

// `state` with every old triple rewritten as above, where `expected(P + "in_proj_weight")` holds
// (the loader expects the new name: a layer of another kind that keeps its own w_q child is left
// alone) and P + "w_k.weight", P + "w_v.weight" are present with w_q's shape; biases likewise,
// when all three are present. The stacked tensor takes the place of the w_q entry; every other
// entry is kept as it is, in order (tensors shared, not copied). A partial or mis-shaped triple is
// left unchanged, for the loader to report by name.
StateDict stack_legacy_qkv(const StateDict& state,
                           const std::function<bool(const std::string&)>& expected);

}  // namespace headlab
