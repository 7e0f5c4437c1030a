// Hook points (layers/hooks.h): names and shapes, caches that agree with the layer's own
// values, edits that take effect, and a model without hooks that runs exactly as before.

#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "core/error.h"
#include "layers/encoder.h"
#include "layers/hooks.h"
#include "layers/registry.h"
#include "tests/layers/hook_test_model.h"

using namespace headlab;
using namespace headlab::hook_test;

namespace {

double max_diff(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  double d = 0;
  for (int64_t i = 0; i < a.numel(); ++i) d = std::max(d, std::fabs(double(a[i]) - b[i]));
  return d;
}

// An attention layer that never returns its weights: asked for them, the encoder says so in one
// line instead of failing deep inside (it was "internal error: node_ != nullptr").
class WeightlessAttention : public MultiHeadAttention {
 public:
  using MultiHeadAttention::MultiHeadAttention;
  AttentionOutput forward(const Var& q, const Var& k, const Var& v, const Tensor* kpm,
                          const Tensor* am, bool) override {
    return {MultiHeadAttention::forward(q, k, v, kpm, am, false).output, Var()};
  }
};
std::shared_ptr<SequenceLayer> make_weightless(LayerOptions& o) {
  return std::make_shared<WeightlessAttention>(read_multi_head_attention_options(o), o.init_rng(),
                                               o.dropout_rng());
}

const char* const kPoints[] = {
    "hook_resid_pre",    "attn.hook_q", "attn.hook_k",    "attn.hook_v",   "attn.hook_scores",
    "attn.hook_pattern", "attn.hook_z", "hook_resid_mid", "mlp.hook_post", "hook_resid_post"};

}  // namespace

TEST_CASE("hooks: every point of every block is cached with its documented shape") {
  for (NormPosition norm : {NormPosition::pre, NormPosition::post}) {
    const EncoderOptions o = options(norm);
    Rng rng(1);
    Encoder model(o, rng);
    model.eval();
    const Ids x = ids(o);
    Hooks hooks;
    hooks.cache("hook_embed");
    for (int64_t l = 0; l < o.layers; ++l)
      for (const char* p : kPoints) hooks.cache(block_hook(l, p));
    EncoderOutput out;
    {
      HookGuard attached(model, hooks);
      NoGradGuard no_grad;
      out = x.run(model, true);
    }
    CHECK(model.attached_hooks() == nullptr);
    const int64_t B = x.b, T = x.t, h = o.heads, d = o.d_model / o.heads;
    CHECK(hooks.cached("hook_embed").shape() == Shape{B, T, o.d_model});
    for (int64_t l = 0; l < o.layers; ++l) {
      CAPTURE(l);
      for (const char* p : {"attn.hook_q", "attn.hook_k", "attn.hook_v", "attn.hook_z"})
        CHECK(hooks.cached(block_hook(l, p)).shape() == Shape{B, T, h, d});
      CHECK(hooks.cached(block_hook(l, "attn.hook_scores")).shape() == Shape{B, h, T, T});
      CHECK(hooks.cached(block_hook(l, "mlp.hook_post")).shape() == Shape{B, T, o.d_ff});
      // The pattern is what need_weights returns, and the softmax of the scores.
      const Tensor& pattern = hooks.cached(block_hook(l, "attn.hook_pattern")).value();
      CHECK(max_diff(pattern, out.weights[static_cast<size_t>(l)].value()) < 1e-6);
      const Tensor again = softmax(hooks.cached(block_hook(l, "attn.hook_scores"))).value();
      CHECK(max_diff(pattern, again) < 1e-6);
      // q . k / sqrt(d) is the score of query 1, key 2, head 1, sentence 0.
      const Tensor& q = hooks.cached(block_hook(l, "attn.hook_q")).value();
      const Tensor& k = hooks.cached(block_hook(l, "attn.hook_k")).value();
      double dot = 0;
      for (int64_t c = 0; c < d; ++c)
        dot += q[((0 * T + 1) * h + 1) * d + c] * k[((0 * T + 2) * h + 1) * d + c];
      const Tensor& scores = hooks.cached(block_hook(l, "attn.hook_scores")).value();
      CHECK(scores[((0 * h + 1) * T + 1) * T + 2] ==
            doctest::Approx(dot / std::sqrt(d)).epsilon(1e-4));
      // Each block's output is the next block's input.
      if (l + 1 < o.layers)
        CHECK(same_bits(hooks.cached(block_hook(l, "hook_resid_post")).value(),
                        hooks.cached(block_hook(l + 1, "hook_resid_pre")).value()));
    }
    // seen() lists the points in the order the forward passed them.
    const std::vector<std::string>& seen = hooks.seen();
    REQUIRE(!seen.empty());
    CHECK(seen.front() == "hook_embed");
    CHECK(seen.back() == block_hook(o.layers - 1, "hook_resid_post"));
  }
}

TEST_CASE("hooks: attached and unused, the forward gives the same bits as without hooks") {
  const EncoderOptions o = options();
  Rng rng(2);
  Encoder model(o, rng);
  model.eval();
  const Ids x = ids(o);
  NoGradGuard no_grad;
  const Tensor plain = x.run(model).logits.value().clone();
  Hooks hooks;
  hooks.cache(block_hook(0, "attn.hook_z"));  // keeps the fused attention
  hooks.cache(block_hook(1, "hook_resid_mid"));
  HookGuard attached(model, hooks);
  CHECK(same_bits(plain, x.run(model).logits.value()));
  // Reading the per-head values takes the per-head path: the same function, not the same bits.
  hooks.cache(block_hook(0, "attn.hook_q"));
  CHECK(max_diff(plain, x.run(model).logits.value()) < 1e-5);
}

TEST_CASE("hooks: zeroing a head at hook_z equals the head gate's ablation") {
  const EncoderOptions o = options();
  Rng rng(3);
  Encoder model(o, rng);
  model.eval();
  const Ids x = ids(o);
  NoGradGuard no_grad;
  const float mask[] = {1.0f, 0.0f};
  model.attention(1).set_head_mask(mask);
  const Tensor gated = x.run(model).logits.value().clone();
  model.reset_head_gates();
  Hooks hooks;
  hooks.edit(block_hook(1, "attn.hook_z"), [](const Var& z) { return zero_head(z, 1); });
  HookGuard attached(model, hooks);
  const Tensor edited = x.run(model).logits.value();
  CHECK(max_diff(gated, edited) < 1e-6);
  CHECK(max_diff(gated, x.run(model).logits.value()) < 1e-6);
}

TEST_CASE("hooks: an edited pattern is the one that multiplies V, and gradients reach a cache") {
  const EncoderOptions o = options();
  Rng rng(4);
  Encoder model(o, rng);
  model.eval();
  const Ids x = ids(o);
  Hooks hooks;
  // Uniform attention in block 0: its heads' outputs are then the mean of V over the keys.
  hooks.edit(block_hook(0, "attn.hook_pattern"),
             [](const Var& a) { return Var(Tensor::full(a.shape(), 1.0f / a.size(3))); });
  hooks.cache(block_hook(0, "attn.hook_v"));
  hooks.cache(block_hook(0, "attn.hook_z"));
  hooks.cache(block_hook(1, "hook_resid_pre"));
  HookGuard attached(model, hooks);
  EncoderOutput out = x.run(model);
  const Tensor& v = hooks.cached(block_hook(0, "attn.hook_v")).value();
  const Tensor& z = hooks.cached(block_hook(0, "attn.hook_z")).value();
  const int64_t T = x.t, hd = o.d_model;
  for (int64_t c = 0; c < hd; ++c) {
    double mean = 0;
    for (int64_t s = 0; s < T; ++s) mean += v[(0 * T + s) * hd + c] / T;
    CHECK(z[(0 * T + 3) * hd + c] == doctest::Approx(mean).epsilon(1e-4));
  }
  // Under a gradient mode a cached value is on the tape: the loss reaches it.
  const Var resid = hooks.cached(block_hook(1, "hook_resid_pre"));
  Var loss = sum(out.logits);
  loss.backward();
  CHECK(resid.has_grad());
}

TEST_CASE("hooks: an edit of the wrong shape and a missing cache are one line naming the point") {
  const EncoderOptions o = options();
  Rng rng(6);
  Encoder model(o, rng);
  const Ids x = ids(o);
  Hooks hooks;
  hooks.edit(block_hook(0, "hook_resid_mid"), [](const Var& r) { return slice(r, 1, 0, 2); });
  HookGuard attached(model, hooks);
  CHECK_THROWS_WITH_AS(x.run(model),
                       doctest::Contains("hooks: the edit at 'blocks.0.hook_resid_mid' returned "
                                         "shape [3, 2, 8] but the point's value is [3, 5, 8]"),
                       Error);
  CHECK_THROWS_WITH_AS(hooks.cached("blocks.9.attn.hook_z"),
                       doctest::Contains("no value cached at 'blocks.9.attn.hook_z'"), Error);
  CHECK_THROWS_WITH_AS(zero_head(Var(Tensor::zeros({1, 2, 2, 3})), 2),
                       doctest::Contains("hooks: head 2 is not one of 2 heads"), Error);
}

TEST_CASE("hooks: an attention layer that returns no weights when asked is one line naming it") {
  // Registered for this case only: other tests list the registry's attention layers.
  register_layer("test_weightless_attention", LayerKind::attention, make_weightless);
  EncoderOptions o = options();
  o.attention_layer = {"test_weightless_attention", {}};
  Rng rng(8);
  Encoder model(o, rng);
  const Ids x = ids(o);
  CHECK_NOTHROW(x.run(model));
  CHECK_THROWS_WITH_AS(x.run(model, true),
                       doctest::Contains("encoder.layers.0.attn (test_weightless_attention): "
                                         "returned no weights though they were asked for"),
                       Error);
  unregister_layer("test_weightless_attention");
}
