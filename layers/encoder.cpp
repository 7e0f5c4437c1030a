#include "layers/encoder.h"

#include "autograd/ops.h"
#include "core/error.h"
#include "layers/dropout.h"
#include "layers/hooks.h"

namespace headlab {
namespace {

EncoderLayerOptions layer_options(const EncoderOptions& o) {
  return {o.d_model,      o.heads, o.head_dim,        o.d_ff,      o.activation, o.norm, o.dropout,
          o.attn_dropout, o.init,  o.attention_layer, o.ffn_layer, o.norm_layer};
}

EmbeddingOptions embedding_options(const EncoderOptions& o, size_t feature) {
  return {o.vocab_sizes[feature], o.d_model, o.embed_init_std};
}

// What the positions slot's layer inherits (positional_encoding reads exactly these keys).
OptionMap position_options(const EncoderOptions& o) {
  return OptionMap{
      {"d_model", o.d_model},
      {"max_len", o.max_len},
      {"kind", o.positions == PositionKind::learned ? "learned" : "sinusoidal"},
      {"init_std", static_cast<double>(o.pos_init_std)},
  };
}

}  // namespace

int64_t Encoder::parameter_count(const EncoderOptions& o) {
  int64_t n = 0;
  for (size_t f = 0; f < o.vocab_sizes.size(); ++f)
    n += Embedding::parameter_count(embedding_options(o, f));
  n += layer_parameter_count(o.positions_layer, position_options(o));
  const EncoderLayerOptions lo = layer_options(o);
  n += o.layers * EncoderLayer::parameter_count(lo);
  if (o.norm == NormPosition::pre)
    n += layer_parameter_count(o.norm_layer, inherited_slot_options(lo));
  return n + o.d_model * o.num_classes + o.num_classes;  // the classifier, a Linear with bias
}

Encoder::Encoder(const EncoderOptions& options, Rng& rng)
    : options_(options), dropout_rng_(std::make_shared<SampleRng>(options.dropout_seed)) {
  const EncoderOptions& o = options;
  if (o.vocab_sizes.empty()) fail("encoder: vocab_sizes is empty (one size per input feature)");
  for (size_t f = 0; f < o.vocab_sizes.size(); ++f)
    if (o.vocab_sizes[f] <= 0)
      fail("encoder: vocab_sizes[{}] is {} but must be positive", f, o.vocab_sizes[f]);
  if (o.layers < 0) fail("encoder: layers is {} but must be >= 0", o.layers);
  if (o.num_classes <= 0) fail("encoder: num_classes is {} but must be positive", o.num_classes);
  check_dropout_p(o.dropout, "encoder: dropout");

  for (size_t f = 0; f < o.vocab_sizes.size(); ++f)
    embeddings_.push_back(
        register_module("embeddings." + std::to_string(f),
                        std::make_shared<Embedding>(embedding_options(o, f), rng)));
  check_layer_kind(o.positions_layer.name, LayerKind::positions, "positions", "encoder");
  positions_ = register_module(
      "positions", make_layer(o.positions_layer, position_options(o), rng, dropout_rng_));
  const EncoderLayerOptions lo = layer_options(o);
  for (int64_t l = 0; l < o.layers; ++l)
    layers_.push_back(register_module("layers." + std::to_string(l),
                                      std::make_shared<EncoderLayer>(lo, rng, dropout_rng_)));
  if (o.norm == NormPosition::pre)
    final_norm_ = register_module(
        "final_norm", make_layer(o.norm_layer, inherited_slot_options(lo), rng, dropout_rng_));
  classifier_ = register_module(
      "classifier",
      std::make_shared<Linear>(LinearOptions{o.d_model, o.num_classes, true, o.init}, rng));
}

void Encoder::attach_hooks(Hooks* hooks, const std::string& prefix) {
  Module::attach_hooks(hooks, prefix);  // embeddings.F., positions., classifier.
  for (size_t l = 0; l < layers_.size(); ++l)
    layers_[l]->attach_hooks(hooks, prefix + block_hook(static_cast<int64_t>(l), ""));
  if (final_norm_) final_norm_->attach_hooks(hooks, prefix + "ln_final.");
}

EncoderLayer& Encoder::layer(int64_t l) {
  if (l < 0 || l >= num_layers())
    fail("encoder: layer {} out of range (the encoder has {} layers)", l, num_layers());
  return *layers_[static_cast<size_t>(l)];
}

void Encoder::reset_head_gates() {
  for (auto& l : layers_) {
    l->attn->reset_head_mask();
    l->attn->set_gate_requires_grad(false);
    l->attn->head_gate().clear_grad();
  }
}

EncoderOutput Encoder::forward(std::span<const std::span<const int32_t>> features, int64_t batch,
                               int64_t length, const Tensor* key_padding_mask, bool need_weights) {
  if (features.size() != embeddings_.size())
    fail("encoder: {} input features given but the model has {} (vocab_sizes)", features.size(),
         embeddings_.size());
  if (batch <= 0 || length <= 0 || length > options_.max_len)
    fail("encoder: batch {} and length {} must be positive with length <= max_len {}", batch,
         length, options_.max_len);
  // A forward that starts at a block's input or output (Hooks::start_at) skips the embeddings
  // and the blocks below it (and that block, for its output); the block passes a start at its
  // input through its hook_resid_pre, and the encoder one at its output through that point.
  size_t first = 0;
  Var x;
  if (Hooks* hooks = attached_hooks(); hooks && hooks->has_starts()) {
    if (need_weights)
      fail(
          "encoder: need_weights in a forward that starts at a hook point: the attention "
          "before the start is not computed");
    for (size_t l = layers_.size(); l-- > 0 && !x.defined();) {
      for (const bool output : {true, false}) {
        const std::string name =
            block_hook(static_cast<int64_t>(l), output ? "hook_resid_post" : "hook_resid_pre");
        const Tensor* start = hook_start(name);
        if (!start) continue;
        if (start->shape() != Shape{batch, length, options_.d_model})
          fail("encoder: the start at {} is {} but the batch is [{}, {}, {}]", name,
               start->shape().str(), batch, length, options_.d_model);
        first = output ? l + 1 : l;
        x = output ? hooks->apply(hook_prefix() + name, Var(*start)) : Var(*start);
        break;
      }
    }
  }
  if (!x.defined()) {
    const Shape ids_shape{batch, length};
    x = embeddings_[0]->forward(features[0], ids_shape);  // [B, T, D]
    for (size_t f = 1; f < features.size(); ++f)
      x = add(x, embeddings_[f]->forward(features[f], ids_shape));
    x = hook("hook_embed", checked_slot("encoder.positions", options_.positions_layer.name,
                                        "positions", x, [&] { return positions_->forward(x); }));
    if (dropout_active() && options_.dropout > 0.0f)
      x = dropout(x, options_.dropout, *dropout_rng_, true);
  }

  const Tensor* attn_mask = nullptr;
  if (options_.causal) {
    if (causal_length_ != length) {
      causal_length_ = length;
      causal_mask_ = Tensor::zeros({length, length});
      for (int64_t t = 0; t < length; ++t)
        for (int64_t s = t + 1; s < length; ++s) causal_mask_[t * length + s] = 1.0f;
    }
    attn_mask = &causal_mask_;
  }
  EncoderOutput out;
  if (need_weights) out.weights.reserve(layers_.size());
  for (size_t l = first; l < layers_.size(); ++l) {
    EncoderLayerOutput y;
    try {
      y = layers_[l]->forward(x, key_padding_mask, attn_mask, need_weights);
    } catch (const LayerError& e) {  // named by the block; the encoder adds where the block is
      throw e.within("encoder.layers." + std::to_string(l));
    }
    x = y.output;
    if (need_weights) out.weights.push_back(y.weights);
  }
  if (final_norm_)
    x = checked_slot("encoder.final_norm", options_.norm_layer.name, "norm", x,
                     [&] { return final_norm_->forward(x); });
  out.hidden = x;
  out.logits = classifier_->forward(x);
  return out;
}

}  // namespace headlab
