// A plugin attention layer that writes its own forward and passes nothing through the hook
// points: it trains and evaluates, and `headlab analyze` must refuse it in one line naming the
// layer and the points it lacks (tests/plugins/test_plugins_cli.cpp).

#include <headlab/autograd/ops.h>
#include <headlab/layers/multi_head_attention.h>
#include <headlab/train/plugins/plugin.h>

namespace {

using namespace headlab;

class OpaqueAttention : public MultiHeadAttention {
 public:
  using MultiHeadAttention::MultiHeadAttention;

  AttentionOutput forward(const Var& query, const Var& key, const Var& value,
                          const Tensor* key_padding_mask, const Tensor* attn_mask,
                          bool need_weights) override {
    (void)key;
    (void)value;
    AttentionOptions ao;
    ao.heads = heads();
    ao.scale = 1.0f / static_cast<float>(head_dim());
    ao.key_padding_mask = key_padding_mask;
    ao.attn_mask = attn_mask;
    Tensor weights;
    if (need_weights) ao.weights = &weights;
    const Var qkv = linear(query, in_proj_weight, in_proj_bias);
    return {w_o->forward(self_attention(qkv, ao)), need_weights ? Var(weights) : Var()};
  }
};

std::shared_ptr<SequenceLayer> make_opaque(LayerOptions& o) {
  return std::make_shared<OpaqueAttention>(read_multi_head_attention_options(o), o.init_rng(),
                                           o.dropout_rng());
}

}  // namespace

HEADLAB_PLUGIN(registry) {
  registry.add_layer("opaque_attention", LayerKind::attention, make_opaque,
                     count_multi_head_attention_parameters);
}
