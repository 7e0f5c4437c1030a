#pragma once
// Talking-heads attention (Shazeer et al. 2020): the heads' logits are mixed by a learned h x h
// matrix before the softmax, and the weights by a second one after it,
//   S'_i = sum_j P_l[i, j] S_j,   A_i = softmax(S'_i + masks),   A'_i = sum_j P_w[i, j] A_j,
// so a head's pattern is no longer its own Q_i K_i^T: no additive bias can express it. The layer
// subclasses MultiHeadAttention and hands it the two mixes as its score and pattern transforms
// (layers/multi_head_attention.h): projections, masks, dropout, the gate and the hook points
// (hook_scores is S' masked, hook_pattern A', hook_z the heads' outputs) are the base class's,
// so `headlab analyze` ablates, scores and patches its heads without any code here.
// Both mixes start at the identity (the layer starts as plain multi-head attention).
// Parameters beside the base class's: "logits_mix" and "weights_mix" [h, h].
// Registered as "talking_heads_attention", kind attention.

#include <cstdint>
#include <memory>

#include <headlab/layers/multi_head_attention.h>
#include <headlab/layers/registry.h>

namespace example {

class TalkingHeadsAttention : public headlab::MultiHeadAttention {
 public:
  TalkingHeadsAttention(const headlab::MultiHeadAttentionOptions& options, headlab::Rng& rng,
                        std::shared_ptr<headlab::SampleRng> dropout_rng);

  headlab::Var logits_mix;   // P_l [h, h]
  headlab::Var weights_mix;  // P_w [h, h]
};

// The keys of multi_head_attention (read_multi_head_attention_options).
std::shared_ptr<headlab::SequenceLayer> make_talking_heads_attention(
    headlab::LayerOptions& options);
int64_t count_talking_heads_attention_parameters(headlab::LayerOptions& options);

}  // namespace example
