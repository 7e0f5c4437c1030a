#include "talking_heads.h"

#include <headlab/autograd/ops.h>

namespace example {

using namespace headlab;

namespace {

Tensor identity(int64_t n) {
  Tensor m = Tensor::zeros({n, n});
  for (int64_t i = 0; i < n; ++i) m[i * n + i] = 1.0f;
  return m;
}

// out[b, i, ..] = sum_j mix[i, j] x[b, j, ..] for x [B, h, T, S]: the heads as the last dim of
// [B, T S, h], one GEMM with mix^T, and back.
Var mix_heads(const Var& x, const Var& mix) {
  const Shape shape = x.shape();
  const int64_t b = shape[0], h = shape[1], ts = shape[2] * shape[3];
  const Var heads_last = transpose(reshape(x, {b, h, ts}));           // [B, T S, h]
  const Var mixed = transpose(matmul(heads_last, mix, false, true));  // [B, h, T S]
  return reshape(mixed, shape);
}

}  // namespace

TalkingHeadsAttention::TalkingHeadsAttention(const MultiHeadAttentionOptions& options, Rng& rng,
                                             std::shared_ptr<SampleRng> dropout_rng)
    : MultiHeadAttention(options, rng, std::move(dropout_rng)) {
  logits_mix = register_parameter("logits_mix", identity(options.heads));
  weights_mix = register_parameter("weights_mix", identity(options.heads));
  set_score_transform([this](const Var& scores) { return mix_heads(scores, logits_mix); });
  set_pattern_transform([this](const Var& weights) { return mix_heads(weights, weights_mix); });
}

std::shared_ptr<SequenceLayer> make_talking_heads_attention(LayerOptions& o) {
  return std::make_shared<TalkingHeadsAttention>(read_multi_head_attention_options(o), o.init_rng(),
                                                 o.dropout_rng());
}

int64_t count_talking_heads_attention_parameters(LayerOptions& o) {
  const MultiHeadAttentionOptions opt = read_multi_head_attention_options(o);
  return MultiHeadAttention::parameter_count(opt) + 2 * opt.heads * opt.heads;
}

}  // namespace example
