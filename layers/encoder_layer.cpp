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
  const int64_t attention = layer_parameter_count(o.attention_layer, inherited) +
                            layer_parameter_count(o.norm_layer, inherited);
  if (o.d_ff == 0) return attention;  // attention-only: no ffn, no norm2
  return attention + layer_parameter_count(o.ffn_layer, inherited) +
         layer_parameter_count(o.norm_layer, inherited);
}

EncoderLayer::EncoderLayer(const EncoderLayerOptions& options, Rng& rng,
                           std::shared_ptr<SampleRng> dropout_rng)
    : options_(options),
      dropout_rng_(dropout_rng ? std::move(dropout_rng) : std::make_shared<SampleRng>(0)) {
  check_dropout_p(options.dropout, "encoder_layer: dropout");
  if (options.d_ff < 0)
    fail("encoder_layer: d_ff is {} but must be >= 0 (0: attention-only)", options.d_ff);
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
  // Attention-only (d_ff = 0) builds no ffn and no norm2, so the init draws of the layers after
  // it are those of a model without them.
  if (options.d_ff > 0)
    ffn = register_module("ffn", make_layer(options.ffn_layer, inherited, rng, dropout_rng_));
  norm1 = register_module("norm1", make_layer(options.norm_layer, inherited, rng, dropout_rng_));
  if (options.d_ff > 0)
    norm2 = register_module("norm2", make_layer(options.norm_layer, inherited, rng, dropout_rng_));
}

void EncoderLayer::attach_hooks(Hooks* hooks, const std::string& prefix) {
  Module::attach_hooks(hooks, prefix);  // this block's own points, and children by name
  attn->attach_hooks(hooks, prefix + "attn.");
  if (ffn) ffn->attach_hooks(hooks, prefix + "mlp.");
  norm1->attach_hooks(hooks, prefix + "ln1.");
  if (norm2) norm2->attach_hooks(hooks, prefix + "ln2.");
}

LayerError::LayerError(std::string path, std::string layer, std::string message)
    : Error(fmt::format("{} ({}): {}", path, layer, message)),
      path_(std::move(path)),
      layer_(std::move(layer)),
      message_(std::move(message)) {}

LayerError LayerError::within(const std::string& parent) const {
  return LayerError(parent + "." + path_, layer_, message_);
}

void check_slot_output(const Var& out, const Var& in, const char* slot) {
  if (!out.defined())
    fail("returned no output: the {} slot's contract is an output of shape {} (its input's)", slot,
         in.shape().str());
  if (out.shape() != in.shape())
    fail("returned an output of shape {}, but the {} slot's contract is the input's shape {}",
         out.shape().str(), slot, in.shape().str());
}

AttentionOutput EncoderLayer::attend(const Var& x, const Tensor* key_padding_mask,
                                     const Tensor* attn_mask, bool need_weights) {
  return in_layer("attn", options_.attention_layer.name, [&] {
    AttentionOutput a = attn->forward(x, x, x, key_padding_mask, attn_mask, need_weights);
    check_slot_output(a.output, x, "attention");
    if (need_weights) {
      if (!a.weights.defined())
        fail(
            "returned no weights though they were asked for (need_weights): its forward must "
            "return AttentionOutput::weights [B, h, T, S] then");
      const Shape expected{x.size(0), attn->heads(), x.size(1), x.size(1)};
      if (a.weights.shape() != expected)
        fail("returned attention weights of shape {}, but the contract is [B, heads, T, T] = {}",
             a.weights.shape().str(), expected.str());
    }
    return a;
  });
}

Var EncoderLayer::residual_dropout(const Var& y) {
  if (!dropout_active() || options_.dropout == 0.0f) return y;
  return dropout(y, options_.dropout, *dropout_rng_, true);
}

EncoderLayerOutput EncoderLayer::forward(const Var& x, const Tensor* key_padding_mask,
                                         const Tensor* attn_mask, bool need_weights) {
  if (x.rank() != 3 || x.size(2) != options_.d_model)
    fail("encoder_layer: input shape {} must be [B, T, {}]", x.shape().str(), options_.d_model);
  AttentionOutput a;
  Var y;
  const Var in = hook("hook_resid_pre", x);
  const std::string& norm_name = options_.norm_layer.name;
  const std::string& ffn_name = options_.ffn_layer.name;
  if (options_.norm == NormPosition::pre) {
    Var n = checked_slot("norm1", norm_name, "norm", in, [&] { return norm1->forward(in); });
    a = attend(n, key_padding_mask, attn_mask, need_weights);
    y = hook("hook_resid_mid", add(in, residual_dropout(a.output)));
    if (attention_only()) return {hook("hook_resid_post", y), a.weights};
    const Var n2 = checked_slot("norm2", norm_name, "norm", y, [&] { return norm2->forward(y); });
    y = add(y, residual_dropout(
                   checked_slot("ffn", ffn_name, "ffn", n2, [&] { return ffn->forward(n2); })));
  } else {
    a = attend(in, key_padding_mask, attn_mask, need_weights);
    // norm(x + r); a LayerNorm slot fuses the addition (LayerNorm::forward_sum).
    const Var r = residual_dropout(a.output);
    y = hook("hook_resid_mid", checked_slot("norm1", norm_name, "norm", in,
                                            [&] { return norm1->forward_sum(in, r); }));
    if (attention_only()) return {hook("hook_resid_post", y), a.weights};
    const Var f =
        residual_dropout(checked_slot("ffn", ffn_name, "ffn", y, [&] { return ffn->forward(y); }));
    y = checked_slot("norm2", norm_name, "norm", y, [&] { return norm2->forward_sum(y, f); });
  }
  y = hook("hook_resid_post", y);
  return {y, a.weights};
}

}  // namespace headlab
