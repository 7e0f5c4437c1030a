#include "layers/encoder_layer.h"

#include "autograd/ops.h"
#include "core/error.h"
#include "layers/dropout.h"

namespace headlab {

NormPosition parse_norm_position(std::string_view name, std::string_view what) {
  if (name == "pre") return NormPosition::pre;
  if (name == "post") return NormPosition::post;
  fail("{}: unknown norm '{}' (known: pre, post)", what, name);
}

OptionMap inherited_slot_options(const EncoderLayerOptions& o) {
  return OptionMap{
      {"d_model", o.d_model},
      {"heads", o.heads},
      {"head_dim", o.head_dim},
      {"d_ff", o.d_ff},
      {"activation", o.activation == Activation::gelu ? "gelu" : "relu"},
      {"attn_dropout", static_cast<double>(o.attn_dropout)},
      {"init", init_name(o.init)},
  };
}

int64_t EncoderLayer::parameter_count(const EncoderLayerOptions& o) {
  const OptionMap inherited = inherited_slot_options(o);
  return layer_parameter_count(o.attention_layer, inherited) +
         layer_parameter_count(o.ffn_layer, inherited) +
         2 * layer_parameter_count(o.norm_layer, inherited);
}

EncoderLayer::EncoderLayer(const EncoderLayerOptions& options, Rng& rng,
                           std::shared_ptr<SampleRng> dropout_rng)
    : options_(options),
      dropout_rng_(dropout_rng ? std::move(dropout_rng) : std::make_shared<SampleRng>(0)) {
  check_dropout_p(options.dropout, "encoder_layer: dropout");
  check_layer_kind(options.attention_layer.name, LayerKind::attention, "attention",
                   "encoder_layer");
  check_layer_kind(options.ffn_layer.name, LayerKind::feed_forward, "ffn", "encoder_layer");
  check_layer_kind(options.norm_layer.name, LayerKind::norm, "norm", "encoder_layer");
  const OptionMap inherited = inherited_slot_options(options);
  auto attention = make_layer(options.attention_layer, inherited, rng, dropout_rng_);
  attn = std::dynamic_pointer_cast<MultiHeadAttention>(attention);
  if (!attn)
    fail(
        "encoder_layer: layer '{}' cannot fill the attention slot: it is not a "
        "MultiHeadAttention",
        options.attention_layer.name);
  register_module("attn", attn);
  ffn = register_module("ffn", make_layer(options.ffn_layer, inherited, rng, dropout_rng_));
  norm1 = register_module("norm1", make_layer(options.norm_layer, inherited, rng, dropout_rng_));
  norm2 = register_module("norm2", make_layer(options.norm_layer, inherited, rng, dropout_rng_));
}

void EncoderLayer::attach_hooks(Hooks* hooks, const std::string& prefix) {
  Module::attach_hooks(hooks, prefix);  // this block's own points, and children by name
  attn->attach_hooks(hooks, prefix + "attn.");
  ffn->attach_hooks(hooks, prefix + "mlp.");
  norm1->attach_hooks(hooks, prefix + "ln1.");
  norm2->attach_hooks(hooks, prefix + "ln2.");
}

Var EncoderLayer::residual_dropout(const Var& y) {
  if (!is_training() || options_.dropout == 0.0f) return y;
  return dropout(y, options_.dropout, *dropout_rng_, true);
}

EncoderLayerOutput EncoderLayer::forward(const Var& x, const Tensor* key_padding_mask,
                                         const Tensor* attn_mask, bool need_weights) {
  if (x.rank() != 3 || x.size(2) != options_.d_model)
    fail("encoder_layer: input shape {} must be [B, T, {}]", x.shape().str(), options_.d_model);
  AttentionOutput a;
  Var y;
  const Var in = hook("hook_resid_pre", x);
  if (options_.norm == NormPosition::pre) {
    Var n = norm1->forward(in);
    a = attn->forward(n, n, n, key_padding_mask, attn_mask, need_weights);
    y = hook("hook_resid_mid", add(in, residual_dropout(a.output)));
    y = add(y, residual_dropout(ffn->forward(norm2->forward(y))));
  } else {
    a = attn->forward(in, in, in, key_padding_mask, attn_mask, need_weights);
    // norm(x + r); a LayerNorm slot fuses the addition (LayerNorm::forward_sum).
    y = hook("hook_resid_mid", norm1->forward_sum(in, residual_dropout(a.output)));
    y = norm2->forward_sum(y, residual_dropout(ffn->forward(y)));
  }
  y = hook("hook_resid_post", y);
  if (need_weights && !a.weights.defined())
    fail(
        "encoder_layer: attention layer '{}' returned no weights though they were asked for "
        "(need_weights): its forward must return AttentionOutput::weights [B, h, T, S] then",
        options_.attention_layer.name);
  return {y, a.weights};
}

}  // namespace headlab
