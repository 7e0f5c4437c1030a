#pragma once
// MultiHeadAttention (Vaswani et al. 2017, sec. 3.2.2), with fused projections:
//   Q = query W_q^T + b_q   [B, T, h*d]      K = key W_k^T + b_k, V = value W_v^T + b_v  [B, S, h*d]
//   A_i = softmax(Q_i K_i^T / sqrt(d) + masks)                 [B, h, T, S]  (weights)
//   head_i = dropout(A_i) V_i                                  [B, h, T, d]
//   out = Concat(g_1 head_1, ..., g_h head_h) W_o^T + b_o      [B, T, d_model]
// Row block i of the fused w_q.weight ([h*d, d_model]) is the seed's W_i^Q transposed, so this
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
// Extension point: a subclass may add a bias to every head's scores by overriding
// attention_bias() (below): A_i = softmax(Q_i K_i^T / sqrt(d) + bias_i + masks). ALiBi's
// -m_i |t - s| (examples/plugin/alibi_attention.h) and learned relative-position biases are of
// this form; need_weights, the gate, dropout and the head analysis work on such a layer
// unchanged, since it runs this class's own per-head path.
// Children: "w_q", "w_k", "w_v" (Linear d_model -> h*d), "w_o" (Linear h*d -> d_model). The
// values of w_q, w_k and w_v (weights, biases) live packed in one buffer and their gradients are
// views of one buffer, so the self-attention projection is one GEMM each way: the invariant, what
// breaks it and how it is kept, in autograd/packed_params.h.
// Throws headlab::Error for bad options (heads not dividing d_model without head_dim) and for
// inputs or masks of the wrong shape, naming the argument and both shapes.

#include <cstdint>
#include <memory>
#include <span>

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

  std::shared_ptr<Linear> w_q, w_k, w_v, w_o;

 protected:
  // The additive per-head score bias for `query_len` queries and `key_len` keys: a Var of shape
  // [h, T, S] (added to every batch item's scaled scores before the masks and the softmax), or
  // an undefined Var for none, the default. Computed from parameters or constants with the ops
  // of autograd/ops.h, its gradient flows like any other value. A layer with a bias always
  // takes the per-head path (the fused self-attention kernel knows no bias). forward() throws
  // naming the shapes when the bias is not [h, T, S].
  virtual Var attention_bias(int64_t query_len, int64_t key_len);

 private:
  void check_inputs(const Var& query, const Var& key, const Var& value,
                    const Tensor* key_padding_mask, const Tensor* attn_mask) const;
  bool gate_is_identity() const;

  MultiHeadAttentionOptions options_;
  int64_t head_dim_ = 0;
  Var gate_;
  std::shared_ptr<SampleRng> dropout_rng_;
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
