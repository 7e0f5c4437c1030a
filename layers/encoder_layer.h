#pragma once
// EncoderLayer: self-attention and a feed-forward block, each with a residual connection and a
// norm, in one of two arrangements:
//   norm "post" (Vaswani et al. 2017):  x = N1(x + drop(Attn(x)));  x = N2(x + drop(FFN(x)))
//   norm "pre"  (Xiong et al. 2020):    x = x + drop(Attn(N1(x)));  x = x + drop(FFN(N2(x)))
//   x [B, T, d_model] -> [B, T, d_model]
// drop is residual dropout (option dropout, as the paper's P_drop); attention dropout on the
// softmax weights is attn_dropout. The three slots are built through the registry, so any
// registered layer of the slot's kind (layers/registry.h) can fill them: attention must be of
// kind attention and a MultiHeadAttention (or subclass), ffn of kind feed_forward and norm of
// kind norm, each mapping [B, T, d_model] to itself. Each slot's factory sees the
// values below as inherited options (d_model, heads, head_dim, d_ff, activation, attn_dropout,
// init) plus the slot's own table.
// d_ff = 0 makes the layer attention-only (Elhage et al. 2021): no ffn slot and no norm2, the
// layer is x = x + drop(Attn(N1(x))) (pre) or x = N1(x + drop(Attn(x))) (post), and ffn and
// norm2 are null; hook_resid_post is then hook_resid_mid's value.
// Children: "attn", "ffn", "norm1", "norm2". An error inside a slot is a LayerError naming the
// child and its layer; so is a slot that breaks its contract: an output that is not
// [B, T, d_model], or (need_weights) attention weights missing or not [B, heads, T, T].
// Hook points (layers/hooks.h), under the prefix the encoder gives ("blocks.L."): hook_resid_pre
// (the input), hook_resid_mid (after the attention's residual; post-norm: after norm1),
// hook_resid_post (the output); the slots' points under "attn.", "mlp.", "ln1." and "ln2.".

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "core/error.h"
#include "core/rng.h"
#include "core/sample_rng.h"
#include "layers/feed_forward.h"
#include "layers/init.h"
#include "layers/module.h"
#include "layers/multi_head_attention.h"
#include "layers/registry.h"

namespace headlab {

// An error raised inside a slot's layer (or a broken slot contract), named once by the module
// path and the layer's registered name: "layers.0.attn (talking_heads_attention): matmul:
// ...". The encoder puts its own path in front (within), so the message reads
// "encoder.layers.0.attn (...): ..." and is never prefixed twice.
class LayerError : public Error {
 public:
  LayerError(std::string path, std::string layer, std::string message);
  const std::string& path() const { return path_; }
  const std::string& layer() const { return layer_; }
  const std::string& message() const { return message_; }
  // The same error with `parent` + "." in front of the path.
  LayerError within(const std::string& parent) const;

 private:
  std::string path_, layer_, message_;
};

// Runs `f` (one slot's forward) and turns a headlab::Error from inside it into a LayerError
// naming `path` and `layer`; a LayerError (already named deeper) passes unchanged.
// (path is a view: the forward passes literals, and a std::string of one longer than the short
// string buffer would be a heap allocation per call.)
template <class F>
auto in_layer(std::string_view path, const std::string& layer, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const LayerError&) {
    throw;
  } catch (const Error& e) {
    throw LayerError(std::string(path), layer, e.what());
  }
}

// A slot's output must be defined and keep the input's shape [B, T, d_model]; throws naming
// `kind` ("norm", "ffn", "attention", "positions") otherwise.
void check_slot_output(const Var& out, const Var& in, const char* kind);

// in_layer over one slot whose contract is "maps its input to that shape": runs `f` and checks
// its output against `in`.
template <class F>
Var checked_slot(std::string_view path, const std::string& layer, const char* kind, const Var& in,
                 F&& f) {
  return in_layer(path, layer, [&] {
    Var out = f();
    check_slot_output(out, in, kind);
    return out;
  });
}

enum class NormPosition { pre, post };
// "pre" or "post"; throws naming `what` otherwise.
NormPosition parse_norm_position(std::string_view name, std::string_view what);

struct EncoderLayerOptions {
  int64_t d_model = 0;
  int64_t heads = 1;
  int64_t head_dim = 0;
  int64_t d_ff = 0;  // 0: attention-only (no feed-forward sublayer)
  Activation activation = Activation::relu;
  NormPosition norm = NormPosition::pre;
  float dropout = 0.0f;
  float attn_dropout = 0.0f;
  Init init = Init::default_uniform;
  LayerSpec attention_layer{"multi_head_attention", {}};
  LayerSpec ffn_layer{"feed_forward", {}};
  LayerSpec norm_layer{"layer_norm", {}};
};

// The values a slot's factory inherits from these options (d_model, heads, head_dim, d_ff,
// activation, attn_dropout, init).
OptionMap inherited_slot_options(const EncoderLayerOptions& options);

struct EncoderLayerOutput {
  Var output;   // [B, T, d_model]
  Var weights;  // [B, h, T, T] when need_weights
};

class EncoderLayer : public Module {
 public:
  // dropout_rng: shared generator for every dropout in the layer; null gives it its own.
  EncoderLayer(const EncoderLayerOptions& options, Rng& rng,
               std::shared_ptr<SampleRng> dropout_rng = nullptr);

  // key_padding_mask [B, T] and attn_mask [T, T] as in MultiHeadAttention (nonzero = masked).
  EncoderLayerOutput forward(const Var& x, const Tensor* key_padding_mask = nullptr,
                             const Tensor* attn_mask = nullptr, bool need_weights = false);

  const EncoderLayerOptions& options() const { return options_; }
  // The slots' points go under the hook vocabulary's names: attn., mlp., ln1., ln2.
  void attach_hooks(Hooks* hooks, const std::string& prefix) override;
  // The parameter count of EncoderLayer(options, ...), from the slots' counters (nothing
  // allocated; see layer_parameter_count).
  static int64_t parameter_count(const EncoderLayerOptions& options);

  std::shared_ptr<MultiHeadAttention> attn;
  std::shared_ptr<SequenceLayer> ffn;  // null when attention-only (d_ff = 0)
  std::shared_ptr<SequenceLayer> norm1;
  std::shared_ptr<SequenceLayer> norm2;  // null when attention-only (d_ff = 0)
  bool attention_only() const { return !ffn; }

 private:
  Var residual_dropout(const Var& y);
  // The attention slot's forward (self-attention of x), its contract checked and its errors
  // named (LayerError).
  AttentionOutput attend(const Var& x, const Tensor* key_padding_mask, const Tensor* attn_mask,
                         bool need_weights);

  EncoderLayerOptions options_;
  std::shared_ptr<SampleRng> dropout_rng_;
};

}  // namespace headlab
