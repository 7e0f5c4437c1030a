#include "alibi_attention.h"

#include <cmath>
#include <cstdlib>

#include <headlab/autograd/ops.h>

namespace example {

using namespace headlab;

namespace {

Tensor geometric_slopes(int64_t heads) {
  Tensor m = Tensor::empty({heads});
  for (int64_t i = 0; i < heads; ++i)
    m[i] = std::exp2(-8.0f * static_cast<float>(i + 1) / static_cast<float>(heads));
  return m;
}

}  // namespace

AlibiAttention::AlibiAttention(const MultiHeadAttentionOptions& options, bool learn_slopes,
                               Rng& rng, std::shared_ptr<Rng> dropout_rng)
    : MultiHeadAttention(options, rng, std::move(dropout_rng)) {
  slopes = learn_slopes ? register_parameter("slopes", geometric_slopes(options.heads))
                        : Var(geometric_slopes(options.heads));
}

Var AlibiAttention::attention_bias(int64_t query_len, int64_t key_len) {
  Tensor distance = Tensor::empty({1, query_len * key_len});  // -|t - s|, row-major [T, S]
  for (int64_t t = 0; t < query_len; ++t)
    for (int64_t s = 0; s < key_len; ++s)
      distance[t * key_len + s] = -static_cast<float>(std::abs(t - s));
  const int64_t h = heads();
  Var bias = matmul(reshape(slopes, {h, 1}), Var(distance));  // [h, T * S]
  return reshape(bias, {h, query_len, key_len});
}

std::shared_ptr<SequenceLayer> make_alibi_attention(LayerOptions& o) {
  const MultiHeadAttentionOptions opt = read_multi_head_attention_options(o);
  const bool learn = o.get_bool("learn_slopes", false);
  return std::make_shared<AlibiAttention>(opt, learn, o.init_rng(), o.dropout_rng());
}

int64_t count_alibi_attention_parameters(LayerOptions& o) {
  const MultiHeadAttentionOptions opt = read_multi_head_attention_options(o);
  return MultiHeadAttention::parameter_count(opt) +
         (o.get_bool("learn_slopes", false) ? opt.heads : 0);
}

}  // namespace example
