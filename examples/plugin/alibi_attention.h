#pragma once
// ALiBi-style attention (Press et al. 2022, "Train Short, Test Long"), in its bidirectional
// form for an encoder: head i's scores get a bias that falls linearly with distance,
//   A_i = softmax(Q_i K_i^T / sqrt(d) - m_i |t - s| + masks),   m_i = 2^(-8 (i + 1) / h),
// the paper's geometric slopes. With learn_slopes = true the slopes are a parameter "slopes"
// [h] starting at those values. Everything else is MultiHeadAttention's: it subclasses it and
// overrides only attention_bias(), so per-head weights (need_weights), the head gate (ablation,
// importance), attention dropout and the head analysis work unchanged.
// Registered as "alibi_attention", kind attention: [model] attention_layer = "alibi_attention".

#include <cstdint>
#include <memory>

#include <headlab/layers/multi_head_attention.h>
#include <headlab/layers/registry.h>

namespace example {

class AlibiAttention : public headlab::MultiHeadAttention {
 public:
  AlibiAttention(const headlab::MultiHeadAttentionOptions& options, bool learn_slopes,
                 headlab::Rng& rng, std::shared_ptr<headlab::Rng> dropout_rng);

  // [h]: a parameter when learned, else a constant.
  headlab::Var slopes;

 protected:
  // -slopes[i] |t - s| as [h, T, S]: the outer product of the slopes and the distances, so a
  // learned slope gets its gradient through matmul.
  headlab::Var attention_bias(int64_t query_len, int64_t key_len) override;
};

// The keys of multi_head_attention (read_multi_head_attention_options) plus learn_slopes (false).
std::shared_ptr<headlab::SequenceLayer> make_alibi_attention(headlab::LayerOptions& options);
int64_t count_alibi_attention_parameters(headlab::LayerOptions& options);

}  // namespace example
