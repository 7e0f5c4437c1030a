#include "layers/multi_head_attention.h"

#include <cmath>
#include <limits>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "core/error.h"
#include "layers/dropout.h"
#include "layers/registry.h"

namespace headlab {

MultiHeadAttention::MultiHeadAttention(const MultiHeadAttentionOptions& options, Rng& rng,
                                       std::shared_ptr<SampleRng> dropout_rng)
    : options_(options) {
  if (options.d_model <= 0 || options.heads <= 0)
    fail("multi_head_attention: d_model ({}) and heads ({}) must be positive", options.d_model,
         options.heads);
  if (options.head_dim < 0)
    fail("multi_head_attention: head_dim is {} but must be >= 0", options.head_dim);
  if (options.head_dim == 0 && options.d_model % options.heads != 0)
    fail(
        "multi_head_attention: heads = {} does not divide d_model = {} (set head_dim to use "
        "heads * head_dim != d_model)",
        options.heads, options.d_model);
  check_dropout_p(options.attn_dropout, "multi_head_attention: attn_dropout");
  head_dim_ = options.head_dim > 0 ? options.head_dim : options.d_model / options.heads;
  const int64_t inner = options.heads * head_dim_;
  // Drawn as three Linear(d_model -> h d) layers drew them, Q, K, V, weight then bias each (the
  // fan is a block's, not the stacked matrix's), so a seed keeps giving the same parameters.
  Tensor weight = Tensor::empty({3 * inner, options.d_model});
  Tensor bias = options.bias ? Tensor::empty({3 * inner}) : Tensor();
  const bool xavier = options.init == Init::xavier_uniform;
  const float bound = xavier ? xavier_bound(options.d_model, inner) : fan_in_bound(options.d_model);
  for (int64_t part = 0; part < 3; ++part) {
    weight.slice(part * inner, (part + 1) * inner)
        .copy_(init_uniform({inner, options.d_model}, bound, rng));
    if (options.bias)
      bias.slice(part * inner, (part + 1) * inner)
          .copy_(xavier ? Tensor::zeros({inner}) : init_uniform({inner}, bound, rng));
  }
  in_proj_weight = register_parameter("in_proj_weight", std::move(weight));
  if (options.bias) in_proj_bias = register_parameter("in_proj_bias", std::move(bias));
  w_o = register_module(
      "w_o", std::make_shared<Linear>(
                 LinearOptions{inner, options.d_model, options.bias, options.init}, rng));
  gate_ = Var(Tensor::full({options.heads}, 1.0f), false);
  dropout_rng_ = dropout_rng ? std::move(dropout_rng) : std::make_shared<SampleRng>(rng.next_u64());
}

void MultiHeadAttention::set_head_mask(std::span<const float> mask) {
  if (static_cast<int64_t>(mask.size()) != options_.heads)
    fail("multi_head_attention: head mask has {} values but the layer has {} heads", mask.size(),
         options_.heads);
  float* g = gate_.value().data();
  for (size_t i = 0; i < mask.size(); ++i) g[i] = mask[i];
}

void MultiHeadAttention::reset_head_mask() {
  gate_.value().fill_(1.0f);
}

void MultiHeadAttention::set_gate_requires_grad(bool on) {
  gate_.set_requires_grad(on);
}

bool MultiHeadAttention::gate_is_identity() const {
  if (gate_.requires_grad()) return false;
  for (float g : gate_.value().span())
    if (g != 1.0f) return false;
  return true;
}

void MultiHeadAttention::check_inputs(const Var& query, const Var& key, const Var& value,
                                      const Tensor* key_padding_mask,
                                      const Tensor* attn_mask) const {
  const int64_t d = options_.d_model;
  if (query.rank() != 3 || query.size(2) != d)
    fail("multi_head_attention: query shape {} must be [B, T, {}]", query.shape().str(), d);
  const int64_t b = query.size(0), t = query.size(1);
  if (key.rank() != 3 || key.size(0) != b || key.size(2) != d)
    fail("multi_head_attention: key shape {} must be [{}, S, {}] (query is {})", key.shape().str(),
         b, d, query.shape().str());
  if (value.shape() != key.shape())
    fail("multi_head_attention: value shape {} must equal key shape {}", value.shape().str(),
         key.shape().str());
  const int64_t s = key.size(1);
  if (key_padding_mask)
    check_shape("multi_head_attention", "key_padding_mask", key_padding_mask->shape(), Shape{b, s});
  if (attn_mask) check_shape("multi_head_attention", "attn_mask", attn_mask->shape(), Shape{t, s});
}

AttentionOutput MultiHeadAttention::forward(const Var& query, const Var& key, const Var& value,
                                            const Tensor* key_padding_mask, const Tensor* attn_mask,
                                            bool need_weights) {
  check_inputs(query, key, value, key_padding_mask, attn_mask);
  const int64_t b = query.size(0), t = query.size(1), s = key.size(1), h = options_.heads;
  constexpr float kMasked = -std::numeric_limits<float>::infinity();
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim_));
  const bool drop = dropout_active() && options_.attn_dropout > 0.0f;
  // A forward that starts at the heads' outputs (Hooks::start_at) skips everything before them;
  // the layer's own gate acts before the point, so the start is taken as it is.
  if (const Tensor* z = hook_start("hook_z")) {
    check_shape("multi_head_attention", "the start at hook_z", z->shape(), {b, t, h, head_dim_});
    if (need_weights)
      fail(
          "multi_head_attention: need_weights in a forward that starts at hook_z: the pattern "
          "is not computed");
    return {w_o->forward(hook_heads("hook_z", Var(z->view({b, t, h * head_dim_})))), Var()};
  }
  const Var bias = attention_bias(t, s);
  if (bias.defined())
    check_shape("multi_head_attention", "attention_bias", bias.shape(), {h, t, s});

  // Fast path (self-attention, no bias or transform, no hook that needs the per-head values;
  // weights only where no gradient is recorded, as in evaluation, since the fused op's are
  // constants): one GEMM for Q, K and V, the fused attention op and, unless the gate is all
  // ones, the gate on the merged heads; the same function as below.
  const bool pattern_wanted = need_weights || hooked("hook_pattern");
  const bool per_head_hooks = hooked("hook_q") || hooked("hook_k") || hooked("hook_v") ||
                              hooked("hook_scores") || hook_edited("hook_pattern");
  if (query.node() == key.node() && query.node() == value.node() &&
      (!pattern_wanted || !grad_enabled()) && !bias.defined() && !score_transform_ &&
      !pattern_transform_ && !per_head_hooks) {
    Var qkv = linear(query, in_proj_weight, in_proj_bias);  // [B, T, 3 h d]
    AttentionOptions ao;
    ao.heads = h;
    ao.scale = scale;
    ao.key_padding_mask = key_padding_mask;
    ao.attn_mask = attn_mask;
    ao.dropout = drop ? options_.attn_dropout : 0.0f;
    ao.rng = dropout_rng_.get();
    Tensor weights;
    if (pattern_wanted) ao.weights = &weights;
    Var heads = self_attention(qkv, ao);  // [B, T, h*d]
    const Var pattern = pattern_wanted ? hook("hook_pattern", Var(weights)) : Var();
    if (!gate_is_identity()) heads = head_gate_merged(heads, gate_);
    heads = hook_heads("hook_z", heads);
    return {w_o->forward(heads), need_weights ? pattern : Var()};
  }

  // Part j's projection (0 Q, 1 K, 2 V) with row block j of in_proj_weight; column block i of
  // its output (rows [j h d + i d, j h d + (i + 1) d)) is head i's, which split_heads moves to
  // its own [T, d] slab so one batched GEMM scores all heads.
  const int64_t inner = h * head_dim_;
  auto project = [&](const Var& x, int64_t j, std::string_view point) {
    const Var w = slice(in_proj_weight, 0, j * inner, (j + 1) * inner);
    const Var b = options_.bias ? slice(in_proj_bias, 0, j * inner, (j + 1) * inner) : Var();
    return split_heads(hook_heads(point, linear(x, w, b)), h);
  };
  Var q = project(query, 0, "hook_q");                                    // [B, h, T, d]
  Var k = project(key, 1, "hook_k");                                      // [B, h, S, d]
  Var v = project(value, 2, "hook_v");                                    // [B, h, S, d]
  Var scores = headlab::scale(batched_matmul(q, k, false, true), scale);  // [B, h, T, S]
  if (bias.defined()) scores = add(scores, bias);  // [h, T, S] broadcast over B
  if (score_transform_) {
    const Shape before = scores.shape();
    scores = score_transform_(scores);
    check_shape("multi_head_attention", "the score transform's result", scores.shape(), before);
  }
  if (key_padding_mask) scores = masked_fill(scores, key_padding_mask->view({b, 1, 1, s}), kMasked);
  if (attn_mask) scores = masked_fill(scores, attn_mask->view({1, 1, t, s}), kMasked);
  scores = hook("hook_scores", scores);
  Var weights = softmax(scores);  // masked keys get 0; fully masked rows are all 0
  if (pattern_transform_) {
    weights = pattern_transform_(weights);
    check_shape("multi_head_attention", "the pattern transform's result", weights.shape(),
                scores.shape());
  }
  weights = hook("hook_pattern", weights);

  Var attend = weights;
  if (drop) attend = dropout(weights, options_.attn_dropout, *dropout_rng_, true);
  Var heads = batched_matmul(attend, v);  // [B, h, T, d]
  if (!gate_is_identity()) heads = headlab::head_gate(heads, gate_);
  Var out = w_o->forward(hook_heads("hook_z", merge_heads(heads)));  // [B, T, h*d] -> [B, T, D]
  return {out, need_weights ? weights : Var()};
}

void MultiHeadAttention::set_score_transform(AttentionTransform transform) {
  score_transform_ = std::move(transform);
}

void MultiHeadAttention::set_pattern_transform(AttentionTransform transform) {
  pattern_transform_ = std::move(transform);
}

Var MultiHeadAttention::hook_heads(std::string_view point, const Var& merged) {
  if (!attached_hooks()) return merged;
  const Shape shape = merged.shape();  // [B, T, h*d]
  const int64_t h = options_.heads;
  const Var z = hook(point, reshape(merged, {shape[0], shape[1], h, shape[2] / h}));
  return reshape(z, shape);
}

Var MultiHeadAttention::attention_bias(int64_t, int64_t) {
  return Var();
}

Tensor average_heads(const Tensor& weights) {
  if (weights.rank() != 4)
    fail("average_heads: weights shape {} must be [B, h, T, S]", weights.shape().str());
  const int64_t b = weights.size(0), h = weights.size(1), ts = weights.size(2) * weights.size(3);
  Tensor out = Tensor::zeros({b, weights.size(2), weights.size(3)});
  const float* w = weights.data();
  float* o = out.data();
  for (int64_t i = 0; i < b; ++i)
    for (int64_t j = 0; j < h; ++j)
      for (int64_t k = 0; k < ts; ++k) o[i * ts + k] += w[(i * h + j) * ts + k] / h;
  return out;
}

int64_t MultiHeadAttention::parameter_count(const MultiHeadAttentionOptions& o) {
  const int64_t inner = o.heads * (o.head_dim > 0 ? o.head_dim : o.d_model / o.heads);
  // in_proj_weight [3 inner, d]; W_o [d, inner]; biases 3 inner + d.
  return 4 * o.d_model * inner + (o.bias ? 3 * inner + o.d_model : 0);
}

MultiHeadAttentionOptions read_multi_head_attention_options(LayerOptions& o) {
  MultiHeadAttentionOptions opt;
  opt.d_model = o.require_int("d_model");
  opt.heads = o.get_int("heads", 1);
  opt.head_dim = o.get_int("head_dim", 0);
  opt.attn_dropout = o.get_float("attn_dropout", 0.0f);
  opt.bias = o.get_bool("bias", true);
  opt.init = parse_init(o.get_string("init", "default"), o.layer());
  return opt;
}

std::shared_ptr<SequenceLayer> make_multi_head_attention_layer(LayerOptions& o) {
  return std::make_shared<MultiHeadAttention>(read_multi_head_attention_options(o), o.init_rng(),
                                              o.dropout_rng());
}

int64_t count_multi_head_attention_parameters(LayerOptions& o) {
  MultiHeadAttentionOptions opt;  // only the keys that decide shapes (no init string parsing)
  opt.d_model = o.require_int("d_model");
  opt.heads = o.get_int("heads", 1);
  opt.head_dim = o.get_int("head_dim", 0);
  opt.bias = o.get_bool("bias", true);
  return MultiHeadAttention::parameter_count(opt);
}

}  // namespace headlab
