#include "layers/encoder_layer.h"

#include "autograd/ops.h"
#include "core/error.h"
#include "layers/dropout.h"
#include "layers/layer_norm.h"

namespace headlab {

NormPosition parse_norm_position(std::string_view name, std::string_view what) {
  if (name == "pre") return NormPosition::pre;
  if (name == "post") return NormPosition::post;
  fail("{}: unknown norm '{}' (known: pre, post)", what, name);
}

toml::table inherited_slot_options(const EncoderLayerOptions& o) {
  return toml::table{
      {"d_model", o.d_model},
      {"heads", o.heads},
      {"head_dim", o.head_dim},
      {"d_ff", o.d_ff},
      {"activation", o.activation == Activation::gelu ? "gelu" : "relu"},
      {"attn_dropout", static_cast<double>(o.attn_dropout)},
      {"init", init_name(o.init)},
  };
}

EncoderLayer::EncoderLayer(const EncoderLayerOptions& options, Rng& rng,
                           std::shared_ptr<Rng> dropout_rng)
    : options_(options),
      dropout_rng_(dropout_rng ? std::move(dropout_rng) : std::make_shared<Rng>(0)) {
  check_dropout_p(options.dropout, "encoder_layer: dropout");
  const toml::table inherited = inherited_slot_options(options);
  auto attention = make_layer(options.attention_layer, inherited, rng, dropout_rng_);
  attn = std::dynamic_pointer_cast<MultiHeadAttention>(attention);
  if (!attn)
    fail("encoder_layer: layer '{}' cannot fill the attention slot: it is not a "
         "MultiHeadAttention",
         options.attention_layer.name);
  register_module("attn", attn);
  ffn = register_module("ffn", make_layer(options.ffn_layer, inherited, rng, dropout_rng_));
  norm1 = register_module("norm1", make_layer(options.norm_layer, inherited, rng, dropout_rng_));
  norm2 = register_module("norm2", make_layer(options.norm_layer, inherited, rng, dropout_rng_));
}

// norm(x + r); a LayerNorm slot runs it as one fused op (add_layer_norm).
Var EncoderLayer::add_norm(const std::shared_ptr<SequenceLayer>& norm, const Var& x,
                           const Var& r) {
  if (const auto* ln = dynamic_cast<const LayerNorm*>(norm.get()))
    if (x.shape() == r.shape() && x.size(-1) == ln->options().dim)
      return add_layer_norm(x, r, ln->weight, ln->bias, ln->options().eps);
  return norm->forward(add(x, r));
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
  if (options_.norm == NormPosition::pre) {
    Var n = norm1->forward(x);
    a = attn->forward(n, n, n, key_padding_mask, attn_mask, need_weights);
    y = add(x, residual_dropout(a.output));
    y = add(y, residual_dropout(ffn->forward(norm2->forward(y))));
  } else {
    a = attn->forward(x, x, x, key_padding_mask, attn_mask, need_weights);
    y = add_norm(norm1, x, residual_dropout(a.output));
    y = add_norm(norm2, y, residual_dropout(ffn->forward(y)));
  }
  return {y, a.weights};
}

}  // namespace headlab
