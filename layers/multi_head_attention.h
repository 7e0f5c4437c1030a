#pragma once
// MultiHeadAttention (Vaswani et al. 2017, sec. 3.2.2), with fused projections:
//   [Q | K | V] = x in_proj_weight^T + in_proj_bias    [B, T, 3 h*d]  (self-attention)
//   Q = query W_Q^T + b_Q   [B, T, h*d]      K = key W_K^T + b_K, V = value W_V^T + b_V  [B, S, h*d]
//   A_i = softmax(Q_i K_i^T / sqrt(d) + masks)                 [B, h, T, S]  (weights)
//   head_i = dropout(A_i) V_i                                  [B, h, T, d]
//   out = Concat(g_1 head_1, ..., g_h head_h) W_o^T + b_o      [B, T, d_model]
// where W_Q, W_K, W_V [h*d, d_model] are the row blocks 0, 1, 2 of in_proj_weight [3 h*d,
// d_model] (b_Q, b_K, b_V those of in_proj_bias [3 h*d]), PyTorch's in_proj_weight layout. Row
// block i of W_Q (rows [i d, (i + 1) d)) is the seed's W_i^Q transposed (likewise K, V), so this
// equals the per-head formula head_i = softmax(Q W_i^Q (K W_i^K)^T / sqrt(d_k)) V W_i^V (a test
// checks it against a plain per-head reference). d = head_dim, default d_model / heads.
//
// Masks (PyTorch's boolean convention: nonzero = masked, that key gets weight 0):
//   key_padding_mask [B, S]: nonzero marks padding keys, masked for every query.
//   attn_mask [T, S]: nonzero at (t, s) hides key s from query t (causal: s > t).
// A query whose keys are all masked gets a zero weight row (never NaN), so its attention
// context is zero and its output row is w_o's bias.
//
// Head gate g [h] (Michel et al. 2019): a Var of ones, not a parameter (not in
// named_parameters or state_dict). set_head_mask() ablates heads (0 removes exactly that
// head's contribution); set_gate_requires_grad(true) makes dL/dg_h available in
// head_gate().grad() after backward, the importance I_h = |dL/dg_h|.
//
// Attention dropout (option attn_dropout, inverted, training only) acts on the weights that
// multiply V; the weights returned with need_weights are the softmax output before dropout.
// Where no gradient is recorded (NoGradGuard: evaluation, the head analysis) they come from the
// fused op with the output, the same bits as without weights; with gradients, from the composed
// per-head ops, so that a loss can flow through them.
//
// Extension points, for attention variants that keep this class's path (projections, head
// split, masks, softmax, dropout, gate, merge, hook points) and change one step of it:
//   attention_bias() (virtual, below): an additive per-head bias,
//     A_i = softmax(Q_i K_i^T / sqrt(d) + bias_i + masks). ALiBi's -m_i |t - s|
//     (examples/plugin/alibi_attention.h) and learned relative-position biases are of this form.
//   set_score_transform(f): scores [B, h, T, S] -> new scores of that shape, after the scale and
//     the bias and before the masks (talking heads, Shazeer et al. 2020: a learned h x h mix of
//     the heads' logits, which no additive bias can express).
//   set_pattern_transform(f): the softmax's output [B, h, T, S] -> the weights that multiply V
//     (talking heads' second mix).
// A layer with any of them takes the per-head path (the fused kernel knows none of them);
// need_weights, the gate, dropout, the hook points and the head analysis work on it unchanged.
//
// Hook points (layers/hooks.h), under the prefix the encoder gives ("blocks.L.attn."):
// hook_q, hook_k, hook_v [B, T, h, d] after the projections; hook_scores [B, h, T, S] as the
// softmax sees them (masked keys -inf); hook_pattern [B, h, T, S], the weights (after the
// pattern transform, before dropout); hook_z [B, T, h, d], the heads' outputs side by side (after
// the gate) before W_o. Reading or editing any of hook_q, hook_k, hook_v, hook_scores, or editing
// hook_pattern, takes the per-head path; reading hook_pattern where no gradient is recorded and
// anything at hook_z keep the fused one. A subclass that writes its own forward passes its
// values through the same points with hook(name, value) (Module) and hook_heads() below.
// Parameters: "in_proj_weight", "in_proj_bias" (with bias) and the child "w_o" (Linear h*d ->
// d_model). Self-attention projects with one GEMM each way straight from in_proj_weight;
// cross-attention (key or value another Var than query) projects each input with its row block
// (slice, whose gradient adds into that block). Initialised as three Linear(d_model -> h*d) were
// before it (block by block Q, K, V, each weight then bias, from the same Rng), so a seed gives
// the same values; checkpoints written with the three children (w_q, w_k, w_v) are read by
// stacking them (layers/qkv_state.h).
// Throws headlab::Error for bad options (heads not dividing d_model without head_dim) and for
// inputs or masks of the wrong shape, naming the argument and both shapes.

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string_view>

#include "core/rng.h"
#include "core/sample_rng.h"
#include "layers/init.h"
#include "layers/linear.h"
#include "layers/module.h"

namespace headlab {

class LayerOptions;

struct MultiHeadAttentionOptions {
  int64_t d_model = 0;
  int64_t heads = 1;
  int64_t head_dim = 0;  // 0: d_model / heads (which must divide)
  float attn_dropout = 0.0f;
  bool bias = true;
  Init init = Init::default_uniform;
};

struct AttentionOutput {
  Var output;   // [B, T, d_model]
  Var weights;  // [B, h, T, S] per head; undefined unless need_weights
};

class MultiHeadAttention : public SequenceLayer {
 public:
  // dropout_rng: masks for attn_dropout; null gives the layer its own, seeded from `rng` after
  // the parameters are drawn.
  MultiHeadAttention(const MultiHeadAttentionOptions& options, Rng& rng,
                     std::shared_ptr<SampleRng> dropout_rng = nullptr);

  // Cross-attention when key/value differ from query. key and value share [B, S, d_model].
  virtual AttentionOutput forward(const Var& query, const Var& key, const Var& value,
                                  const Tensor* key_padding_mask = nullptr,
                                  const Tensor* attn_mask = nullptr, bool need_weights = false);
  // Self-attention without masks (the SequenceLayer interface).
  Var forward(const Var& x) override { return forward(x, x, x).output; }

  // The parameter count of MultiHeadAttention(options, ...) (nothing allocated).
  static int64_t parameter_count(const MultiHeadAttentionOptions& options);

  const MultiHeadAttentionOptions& options() const { return options_; }
  int64_t heads() const { return options_.heads; }
  int64_t head_dim() const { return head_dim_; }

  // The gate [h]. Its value may also be edited in place.
  const Var& head_gate() const { return gate_; }
  // Sets the gate to `mask` (h values; 0 ablates, 1 keeps). Throws on a wrong length.
  void set_head_mask(std::span<const float> mask);
  // Back to all ones.
  void reset_head_mask();
  void set_gate_requires_grad(bool on);

  // [3 h*d, d_model]: rows [0, h d) project Q, [h d, 2 h d) K, [2 h d, 3 h d) V.
  Var in_proj_weight;
  // [3 h*d], the same blocks; undefined without bias.
  Var in_proj_bias;
  std::shared_ptr<Linear> w_o;

 protected:
  // The additive per-head score bias for `query_len` queries and `key_len` keys: a Var of shape
  // [h, T, S] (added to every batch item's scaled scores before the masks and the softmax), or
  // an undefined Var for none, the default. Computed from parameters or constants with the ops
  // of autograd/ops.h, its gradient flows like any other value. A layer with a bias always
  // takes the per-head path (the fused self-attention kernel knows no bias). forward() throws
  // naming the shapes when the bias is not [h, T, S].
  virtual Var attention_bias(int64_t query_len, int64_t key_len);

  // See the top. Set once, from the subclass's constructor; the function may use the layer's
  // parameters (registered by the subclass) and the ops of autograd/ops.h. forward() throws
  // naming the transform and both shapes when its result's shape is not its input's.
  using AttentionTransform = std::function<Var(const Var&)>;
  void set_score_transform(AttentionTransform transform);
  void set_pattern_transform(AttentionTransform transform);

  // Hook point `point` for heads side by side, merged [B, T, h*d]: the hook sees (and an edit
  // returns) them as [B, T, h, d]; the value goes on merged. Free without hooks attached.
  Var hook_heads(std::string_view point, const Var& merged);
  // The generator of attention dropout's masks, for a subclass that draws its own.
  SampleRng& dropout_rng() { return *dropout_rng_; }

 private:
  void check_inputs(const Var& query, const Var& key, const Var& value,
                    const Tensor* key_padding_mask, const Tensor* attn_mask) const;
  bool gate_is_identity() const;

  MultiHeadAttentionOptions options_;
  int64_t head_dim_ = 0;
  Var gate_;
  std::shared_ptr<SampleRng> dropout_rng_;
  AttentionTransform score_transform_, pattern_transform_;
};

// Averages per-head weights [B, h, T, S] over heads -> [B, T, S] (what PyTorch returns by
// default); not differentiable.
Tensor average_heads(const Tensor& weights);

// Registry factory "multi_head_attention": keys d_model, heads, head_dim, attn_dropout, bias,
// init; and its counter. read_multi_head_attention_options reads those keys, for the factory of
// a subclass (which then asks for its own keys too).
std::shared_ptr<SequenceLayer> make_multi_head_attention_layer(LayerOptions& options);
int64_t count_multi_head_attention_parameters(LayerOptions& options);
MultiHeadAttentionOptions read_multi_head_attention_options(LayerOptions& options);

}  // namespace headlab
