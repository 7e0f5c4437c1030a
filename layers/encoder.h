#pragma once
// Encoder: the model the trainer trains and the head analysis inspects.
//
//   x = positions(sum_f Embedding_f(ids_f))        [B, T, d_model]   (then dropout)
//                                                  (the positions slot: x + P[:T] by default)
//   x = EncoderLayer_l(x), l = 0..layers-1         (pre- or post-norm, see encoder_layer.h)
//   x = final_norm(x)                              (pre-norm only)
//   logits = classifier(x)                         [B, T, num_classes]
//
// Usage (trainer):
//   EncoderOptions opt;                       // fill from [model]; defaults = flagship model
//   opt.vocab_sizes = {17, 4};                // one Embedding per input feature
//   Rng init_rng(seed);
//   Encoder model(opt, init_rng);             // parameters drawn from init_rng, in order
//   model.train();                            // or model.eval() for evaluation
//   std::span<const int32_t> feats[] = {category_ids, colour_ids};  // each [B*T], row-major
//   EncoderOutput out = model.forward(feats, B, T);
//   Var loss = cross_entropy(out.logits, labels, -100);
//   loss.backward();                          // grads in model.named_parameters()
//   // evaluation: { NoGradGuard g; model.eval(); auto o = model.forward(feats, B, T, nullptr, true); }
//   // o.weights[l] is layer l's [B, h, T, T] (per head, softmax before dropout)
//   // ablation: model.attention(l).set_head_mask({1, 0, 1, 1}); ... model.reset_head_gates();
//   // importance: model.attention(l).set_gate_requires_grad(true); forward, loss.backward();
//   //   |model.head_gate(l).grad()[h]|; gate gradients accumulate across backward calls and
//   //   model.zero_grad() does not touch them (gates are not parameters): head_gate(l).zero_grad()
//   // dropout: model.dropout_rng().set_position(step, first_sample) before a training forward
//   // checkpoint: model.state_dict() (dropout masks are keyed, nothing else to save)
//
// Causal (options.causal): every layer's attention gets the mask attn_mask[t, s] = (s > t), so
// that position t reads only positions <= t; hook_scores shows -inf and hook_pattern 0 above the
// diagonal, on the fused path and the per-head one alike.
//
// Hook points (layers/hooks.h): hook_embed (the embeddings with positions, before dropout),
// blocks.L.* (layers/encoder_layer.h: hook_resid_pre/mid/post, attn.hook_q/k/v/scores/pattern/z,
// mlp.hook_post), ln_final.* for a final norm that has points. Read them with a Hooks cache and
// HookGuard(model, hooks) around a forward; edit them with Hooks::edit.
//
// Parameter names: embeddings.<f>.weight, positions.weight (learned only),
// layers.<l>.attn.in_proj_{weight,bias}, layers.<l>.{attn.w_o,ffn.{w1,w2}}.{weight,bias},
// layers.<l>.norm{1,2}.*,
// final_norm.* (pre-norm only), classifier.{weight,bias}.
// Init draw order: embeddings, positions, layers in order, final norm, classifier.
// Throws headlab::Error for inconsistent options (naming the key) and inputs of the wrong size.

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/rng.h"
#include "core/sample_rng.h"
#include "layers/embedding.h"
#include "layers/encoder_layer.h"
#include "layers/linear.h"
#include "layers/module.h"
#include "layers/positional_encoding.h"

namespace headlab {

struct EncoderOptions {
  std::vector<int64_t> vocab_sizes{17, 4};  // per input feature
  int64_t max_len = 17;
  int64_t d_model = 64;
  int64_t heads = 4;
  int64_t head_dim = 0;  // 0: d_model / heads
  int64_t layers = 1;
  int64_t d_ff = 128;   // 0: attention-only layers (no feed-forward sublayer; encoder_layer.h)
  bool causal = false;  // each query sees only keys at or before it (a decoder, next-token tasks)
  int64_t num_classes = 64;
  Activation activation = Activation::relu;
  NormPosition norm = NormPosition::pre;
  PositionKind positions = PositionKind::learned;
  float embed_init_std = 1.0f;
  float pos_init_std = 1.0f;
  float dropout = 0.0f;               // on the embedding sum and on each residual branch
  float attn_dropout = 0.0f;          // on the attention weights
  Init init = Init::default_uniform;  // Linear layers
  uint64_t dropout_seed = 0;          // the key of dropout_rng()
  LayerSpec attention_layer{"multi_head_attention", {}};
  LayerSpec ffn_layer{"feed_forward", {}};
  LayerSpec norm_layer{"layer_norm", {}};  // also the final norm
  // A layer of kind positions; it inherits d_model, max_len, kind (positions) and init_std
  // (pos_init_std).
  LayerSpec positions_layer{"positional_encoding", {}};
};

struct EncoderOutput {
  Var logits;                // [B, T, num_classes]
  Var hidden;                // [B, T, d_model], the classifier's input
  std::vector<Var> weights;  // per layer [B, h, T, T]; empty unless need_weights
};

class Encoder : public Module {
 public:
  Encoder(const EncoderOptions& options, Rng& rng);
  // The number of parameter values Encoder(options, ...) has (the sum of named_parameters()'
  // numels), from each part's options: nothing is allocated, so the memory estimate can run it
  // on any size. Registry layers count through their counters (layers/registry.h).
  static int64_t parameter_count(const EncoderOptions& options);

  // features: one span of B*T ids per feature (row-major [B, T]), in vocab_sizes order.
  // key_padding_mask [B, T]: nonzero marks padding (masked as keys).
  EncoderOutput forward(std::span<const std::span<const int32_t>> features, int64_t batch,
                        int64_t length, const Tensor* key_padding_mask = nullptr,
                        bool need_weights = false);
  EncoderOutput forward(std::initializer_list<std::span<const int32_t>> features, int64_t batch,
                        int64_t length, const Tensor* key_padding_mask = nullptr,
                        bool need_weights = false) {
    return forward(std::span<const std::span<const int32_t>>(features.begin(), features.size()),
                   batch, length, key_padding_mask, need_weights);
  }

  const EncoderOptions& options() const { return options_; }
  // Blocks under "blocks.L." (not their parameter names' "layers.L."), the final norm under
  // "ln_final.".
  void attach_hooks(Hooks* hooks, const std::string& prefix) override;
  int64_t num_layers() const { return static_cast<int64_t>(layers_.size()); }
  EncoderLayer& layer(int64_t l);
  MultiHeadAttention& attention(int64_t l) { return *layer(l).attn; }
  const Var& head_gate(int64_t l) { return attention(l).head_gate(); }
  // Sets every layer's gate back to ones, stops gate gradients and drops them.
  void reset_head_gates();

  // The generator of every dropout mask in the model, keyed by sample: set_position(step,
  // first_sample) before a forward makes its masks a function of where each sentence sits in
  // the step's global batch (core/sample_rng.h). It holds no state worth saving.
  SampleRng& dropout_rng() { return *dropout_rng_; }

 private:
  EncoderOptions options_;
  std::shared_ptr<SampleRng> dropout_rng_;
  std::vector<std::shared_ptr<Embedding>> embeddings_;
  std::shared_ptr<SequenceLayer> positions_;
  std::vector<std::shared_ptr<EncoderLayer>> layers_;
  std::shared_ptr<SequenceLayer> final_norm_;
  std::shared_ptr<Linear> classifier_;
  Tensor causal_mask_;  // [T, T] for causal_length_ (rebuilt when T changes)
  int64_t causal_length_ = 0;
};

}  // namespace headlab
