#include <doctest/doctest.h>

#include <cmath>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "core/error.h"
#include "layers/multi_head_attention.h"
#include "tests/layers/reference.h"

using namespace headlab;
using namespace headlab::testing;

namespace {

struct Inputs {
  Tensor q, k, v;
};

Inputs make_inputs(Rng& rng, int64_t b, int64_t t, int64_t s, int64_t d, bool cross) {
  Inputs in;
  in.q = randn({b, t, d}, rng);
  in.k = cross ? randn({b, s, d}, rng) : in.q;
  in.v = cross ? randn({b, s, d}, rng) : in.q;
  return in;
}

Tensor causal_mask(int64_t t, int64_t s) {
  Tensor m = Tensor::zeros({t, s});
  for (int64_t i = 0; i < t; ++i)
    for (int64_t j = i + 1; j < s; ++j) m[i * s + j] = 1.0f;
  return m;
}

bool all_finite(const Tensor& t) {
  for (float v : t.span())
    if (!std::isfinite(v)) return false;
  return true;
}

// A subclass with a fixed additive score bias [h, T, S] (the attention_bias extension point).
class BiasedAttention : public MultiHeadAttention {
 public:
  BiasedAttention(const MultiHeadAttentionOptions& o, Rng& rng, Tensor bias)
      : MultiHeadAttention(o, rng), bias_(std::move(bias)) {}
  Tensor bias_;

 protected:
  Var attention_bias(int64_t, int64_t) override { return Var(bias_); }
};

}  // namespace

TEST_CASE("layers: an attention_bias is added to each head's scores, before the masks") {
  Rng rng(11);
  const int64_t h = 2, t = 3, s = 4;
  Tensor bias = randn({h, t, s}, rng);
  bias[0 * t * s + 1 * s + 2] = -1e9f;  // head 0, query 1 cannot see key 2: like a mask
  BiasedAttention mha({8, h}, rng, bias);
  Inputs in = make_inputs(rng, 2, t, s, 8, true);
  const Tensor causal = causal_mask(t, s);
  mha.set_head_mask(std::vector<float>{1.0f, 0.5f});
  AttentionOutput out = mha.forward(Var(in.q), Var(in.k), Var(in.v), nullptr, &causal, true);
  RefAttention ref = ref_attention(mha, in.q, in.k, in.v, nullptr, &causal, {1.0, 0.5}, &bias);
  CHECK(max_abs_diff(out.output.value(), ref.output) < 1e-4);
  CHECK(max_abs_diff(out.weights.value(), ref.weights) < 1e-5);
  CHECK(out.weights.value()[1 * s + 2] < 1e-6f);  // [b 0, head 0, query 1, key 2]
  // Self-attention with a bias takes the per-head path too (the fused kernel has no bias).
  Rng rng2(11);
  BiasedAttention self({8, h}, rng2, Tensor::zeros({h, 5, 5}));
  Var x(randn({2, 5, 8}, rng2));
  CHECK(self.forward(x).shape() == Shape{2, 5, 8});
  CHECK_THROWS_WITH_AS(
      self.forward(Var(randn({2, 4, 8}, rng2))),
      doctest::Contains("attention_bias shape is [2, 5, 5] but expected [2, 4, 4]"), Error);
}

TEST_CASE("layers: multi_head_attention output and per-head weight shapes") {
  Rng rng(1);
  MultiHeadAttention mha({8, 2}, rng);
  CHECK(mha.head_dim() == 4);
  Inputs in = make_inputs(rng, 3, 5, 7, 8, true);
  AttentionOutput out = mha.forward(Var(in.q), Var(in.k), Var(in.v), nullptr, nullptr, true);
  CHECK(out.output.shape() == Shape{3, 5, 8});
  CHECK(out.weights.shape() == Shape{3, 2, 5, 7});
  CHECK_FALSE(mha.forward(Var(in.q), Var(in.k), Var(in.v)).weights.defined());
  CHECK(mha.forward(Var(in.q)).shape() == Shape{3, 5, 8});  // SequenceLayer: self-attention
  CHECK(mha.in_proj_weight.shape() == Shape{24, 8});        // Q, K, V row blocks of [h d, d_model]
  CHECK(mha.in_proj_bias.shape() == Shape{24});
  CHECK(average_heads(out.weights.value()).shape() == Shape{3, 5, 7});
}

TEST_CASE("layers: multi_head_attention equals the seed's per-head formula") {
  struct Setup {
    const char* name;
    MultiHeadAttentionOptions options;
    bool cross;
  };
  for (const Setup& setup :
       {Setup{"self, 2 heads", {8, 2}, false}, Setup{"cross, 4 heads", {8, 4}, true},
        Setup{"head_dim 3 with 4 heads over d_model 6", {6, 4, 3}, true}}) {
    CAPTURE(setup.name);
    Rng rng(7);
    MultiHeadAttention mha(setup.options, rng);
    Inputs in = make_inputs(rng, 2, 3, 5, setup.options.d_model, setup.cross);
    AttentionOutput out = mha.forward(Var(in.q), Var(in.k), Var(in.v), nullptr, nullptr, true);
    RefAttention ref = ref_attention(mha, in.q, in.k, in.v, nullptr, nullptr,
                                     std::vector<double>(setup.options.heads, 1.0));
    CHECK(max_abs_diff(out.output.value(), ref.output) < 1e-4);
    CHECK(max_abs_diff(out.weights.value(), ref.weights) < 1e-5);
  }
}

TEST_CASE("layers: multi_head_attention masks give zero weight where masked and never NaN") {
  Rng rng(3);
  MultiHeadAttention mha({8, 2}, rng);
  const int64_t t = 4, s = 4;
  Inputs in = make_inputs(rng, 2, t, s, 8, false);
  // Batch 0 pads its last key; batch 1 pads its first, which with the causal mask leaves its
  // query 0 with no key at all.
  Tensor kpm = Tensor::zeros({2, s});
  kpm[s - 1] = 1.0f;
  kpm[s] = 1.0f;
  const Tensor causal = causal_mask(t, s);
  Var q(in.q, true);
  AttentionOutput out = mha.forward(q, q, q, &kpm, &causal, true);
  const Tensor& w = out.weights.value();
  CHECK(all_finite(out.output.value()));
  CHECK(all_finite(w));
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t i = 0; i < t; ++i) {
        double row = 0;
        bool any_key = false;
        for (int64_t j = 0; j < s; ++j) {
          const float a = w[((b * 2 + h) * t + i) * s + j];
          const bool masked = kpm[b * s + j] != 0 || j > i;
          if (masked) CHECK(a == 0.0f);
          any_key = any_key || !masked;
          row += a;
        }
        CHECK(row == doctest::Approx(any_key ? 1.0 : 0.0));
      }
  // The query with no key: its attention context is 0, so its output row is W^O's bias.
  for (int64_t j = 0; j < 8; ++j)
    CHECK(out.output.value()[(1 * t + 0) * 8 + j] == doctest::Approx(mha.w_o->bias.value()[j]));
  RefAttention ref = ref_attention(mha, in.q, in.q, in.q, &kpm, &causal, {1.0, 1.0});
  CHECK(max_abs_diff(out.output.value(), ref.output) < 1e-4);
  CHECK(max_abs_diff(w, ref.weights) < 1e-5);
  // Gradients through the masked scores are finite too.
  sum(out.output).backward();
  CHECK(all_finite(q.grad()));
}

TEST_CASE("layers: multi_head_attention gate 0 removes exactly that head's contribution") {
  Rng rng(11);
  MultiHeadAttention mha({8, 4}, rng);
  Inputs in = make_inputs(rng, 2, 3, 5, 8, true);
  const std::vector<double> ones(4, 1.0);
  RefAttention ref = ref_attention(mha, in.q, in.k, in.v, nullptr, nullptr, ones);
  const Tensor full = mha.forward(Var(in.q), Var(in.k), Var(in.v)).output.value().clone();
  for (int64_t h = 0; h < 4; ++h) {
    CAPTURE(h);
    std::vector<float> mask(4, 1.0f);
    mask[h] = 0.0f;
    mha.set_head_mask(mask);
    const Tensor ablated = mha.forward(Var(in.q), Var(in.k), Var(in.v)).output.value();
    double worst = 0;
    for (int64_t i = 0; i < full.numel(); ++i)
      worst = std::max(worst, std::fabs((full[i] - ablated[i]) - ref.contribution[h][i]));
    CHECK(worst < 1e-4);
  }
  mha.set_head_mask(std::vector<float>(4, 0.0f));  // every head off: only the bias is left
  const Tensor none = mha.forward(Var(in.q), Var(in.k), Var(in.v)).output.value();
  for (int64_t i = 0; i < none.numel(); ++i)
    CHECK(none[i] == doctest::Approx(mha.w_o->bias.value()[i % 8]));
  mha.reset_head_mask();
  CHECK(max_abs_diff(mha.forward(Var(in.q), Var(in.k), Var(in.v)).output.value(), full) == 0.0);
  CHECK_THROWS_WITH_AS(mha.set_head_mask(std::vector<float>(3, 1.0f)),
                       doctest::Contains("3 values but the layer has 4 heads"), Error);
}

TEST_CASE("layers: multi_head_attention gate gradient is the head importance dL/dg_h") {
  Rng rng(5);
  MultiHeadAttention mha({8, 4}, rng);
  CHECK_FALSE(mha.head_gate().requires_grad());
  CHECK(mha.named_parameters().size() == 4);  // in_proj_{weight,bias}, w_o.*: the gate is not one
  Inputs in = make_inputs(rng, 2, 3, 3, 8, false);
  const Tensor probe = randn({2, 3, 8}, rng);
  mha.set_gate_requires_grad(true);
  Var loss = sum(mul(mha.forward(Var(in.q)), Var(probe)));
  loss.backward();
  // L = sum probe * (sum_h g_h c_h + b), so dL/dg_h = sum probe * c_h.
  RefAttention ref = ref_attention(mha, in.q, in.q, in.q, nullptr, nullptr, {1, 1, 1, 1});
  for (int64_t h = 0; h < 4; ++h) {
    double expected = 0;
    for (int64_t i = 0; i < probe.numel(); ++i) expected += probe[i] * ref.contribution[h][i];
    CHECK(mha.head_gate().grad()[h] == doctest::Approx(expected).epsilon(1e-4));
  }
}

TEST_CASE("layers: multi_head_attention rejects bad options, inputs and masks") {
  Rng rng(1);
  CHECK_THROWS_WITH_AS(MultiHeadAttention({64, 5}, rng),
                       doctest::Contains("heads = 5 does not divide d_model = 64"), Error);
  CHECK_NOTHROW(MultiHeadAttention({64, 5, 8}, rng));  // explicit head_dim: W^O maps 40 -> 64
  CHECK_THROWS_WITH_AS(MultiHeadAttention({8, 2, 0, 1.0f}, rng), doctest::Contains("attn_dropout"),
                       Error);
  MultiHeadAttention mha({8, 2}, rng);
  Var x(randn({2, 3, 8}, rng));
  Var bad(randn({2, 3, 6}, rng));
  CHECK_THROWS_WITH_AS(mha.forward(bad), doctest::Contains("query shape [2, 3, 6]"), Error);
  Var other(randn({2, 4, 8}, rng));
  CHECK_THROWS_WITH_AS(mha.forward(x, other, x), doctest::Contains("value shape"), Error);
  Tensor kpm = Tensor::zeros({2, 4});
  CHECK_THROWS_WITH_AS(mha.forward(x, x, x, &kpm), doctest::Contains("key_padding_mask"), Error);
  Tensor am = Tensor::zeros({3, 4});
  CHECK_THROWS_WITH_AS(mha.forward(x, x, x, nullptr, &am), doctest::Contains("attn_mask"), Error);
}

TEST_CASE("layers: attention dropout acts on the weights in training only") {
  Rng rng(9);
  MultiHeadAttention plain({8, 2}, rng);
  Rng rng2(9);
  MultiHeadAttention dropping({8, 2, 0, 0.5f}, rng2);
  Inputs in = make_inputs(rng, 2, 6, 6, 8, false);
  Var x(in.q);
  dropping.eval();
  CHECK(max_abs_diff(dropping.forward(x).value(), plain.forward(x).value()) == 0.0);
  dropping.train();
  AttentionOutput out = dropping.forward(x, x, x, nullptr, nullptr, true);
  CHECK(max_abs_diff(out.output.value(), plain.forward(x).value()) > 1e-3);
  // The returned weights are the softmax before dropout.
  const AttentionOutput ref = plain.forward(x, x, x, nullptr, nullptr, true);
  CHECK(max_abs_diff(out.weights.value(), ref.weights.value()) < 1e-6);
}

TEST_CASE("layers: average_heads is the mean over heads") {
  Tensor w = Tensor::from({1, 2, 1, 2}, {0.2f, 0.8f, 0.6f, 0.4f});
  Tensor avg = average_heads(w);
  CHECK(avg.shape() == Shape{1, 1, 2});
  CHECK(avg[0] == doctest::Approx(0.4));
  CHECK(avg[1] == doctest::Approx(0.6));
}

TEST_CASE("layers: without gradients, need_weights takes the fused attention and its weights") {
  Rng rng(12);
  MultiHeadAttention mha({16, 4}, rng);
  Inputs in = make_inputs(rng, 3, 7, 7, 16, false);
  Var x(in.q);
  mha.eval();
  const AttentionOutput composed = mha.forward(x, x, x, nullptr, nullptr, true);  // recorded
  NoGradGuard no_grad;
  const AttentionOutput fused = mha.forward(x, x, x, nullptr, nullptr, true);
  // The output is the fused op's, bit for bit what the call without weights gives ...
  CHECK(max_abs_diff(fused.output.value(), mha.forward(x).value()) == 0.0);
  // ... and the weights are the softmax the composed ops compute, to rounding.
  REQUIRE(fused.weights.value().shape() == composed.weights.value().shape());
  CHECK(max_abs_diff(fused.weights.value(), composed.weights.value()) < 1e-6);
  CHECK(max_abs_diff(fused.output.value(), composed.output.value()) < 1e-5);
}

TEST_CASE(
    "layers: the fused self_attention op returns its weights only where nothing is recorded") {
  Rng rng(13);
  Tensor qkv = Tensor::empty({2, 5, 3 * 2 * 4});
  for (int64_t i = 0; i < qkv.numel(); ++i) qkv[i] = rng.normal();
  Tensor weights;
  AttentionOptions o;
  o.heads = 2;
  o.scale = 0.5f;
  o.weights = &weights;
  CHECK_THROWS_WITH_AS(self_attention(Var(qkv, true), o),
                       doctest::Contains("self_attention: weights are returned only where"), Error);
  self_attention(Var(qkv), o);
  CHECK(weights.shape() == Shape{2, 2, 5, 5});
  for (int64_t r = 0; r < 2 * 2 * 5; ++r) {
    double sum = 0;
    for (int64_t j = 0; j < 5; ++j) sum += weights[r * 5 + j];
    CHECK(sum == doctest::Approx(1.0).epsilon(1e-6));
  }
}
