#include "layers/layer_checks.h"

#include <cmath>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "core/rng.h"
#include "layers/dropout.h"
#include "layers/embedding.h"
#include "layers/encoder.h"
#include "layers/encoder_layer.h"
#include "layers/feed_forward.h"
#include "layers/layer_norm.h"
#include "layers/linear.h"
#include "layers/multi_head_attention.h"
#include "layers/positional_encoding.h"
#include "layers/registry.h"
#include "layers/softmax.h"

namespace headlab {
namespace {

using Run = std::function<GradcheckResult(uint64_t)>;

Tensor randn(const Shape& shape, Rng& rng, float std = 1.0f) {
  Tensor t = Tensor::empty(shape);
  for (float& v : t.span()) v = rng.normal(0.0f, std);
  return t;
}

GradcheckOptions options_for(uint64_t seed) {
  GradcheckOptions o;
  o.seed = seed;
  return o;
}

std::vector<Var> plus_parameters(std::vector<Var> wrt, const Module& m) {
  for (const Var& p : m.parameters()) wrt.push_back(p);
  return wrt;
}

GradcheckCase layer_case(std::string name, std::string variant, Run run) {
  return GradcheckCase{std::move(name), "layer", std::move(run), std::move(variant)};
}

// Padding mask [2, S]: batch 1's first key is padding. Causal mask [T, S]: key s hidden from
// query t when s > t. Together they leave query 0 of batch 1 with no key (a zero row).
Tensor padding_mask(int64_t s) {
  Tensor m = Tensor::zeros({2, s});
  m[s] = 1.0f;
  return m;
}
Tensor causal_mask(int64_t t, int64_t s) {
  Tensor m = Tensor::zeros({t, s});
  for (int64_t i = 0; i < t; ++i)
    for (int64_t j = i + 1; j < s; ++j) m[i * s + j] = 1.0f;
  return m;
}

GradcheckResult check_mha(uint64_t seed, const MultiHeadAttentionOptions& opt, bool cross,
                          bool masks, const std::vector<float>& gate, bool train) {
  Rng rng(seed);
  auto drop = std::make_shared<SampleRng>(seed + 1);
  MultiHeadAttention mha(opt, rng, drop);
  mha.train(train);
  const int64_t s = cross ? 4 : 3;
  Var q(randn({2, 3, opt.d_model}, rng), true);
  Var k = cross ? Var(randn({2, s, opt.d_model}, rng), true) : q;
  Var v = cross ? Var(randn({2, s, opt.d_model}, rng), true) : q;
  const Tensor kpm = padding_mask(s), causal = causal_mask(3, s);
  std::vector<Var> wrt = cross ? std::vector<Var>{q, k, v} : std::vector<Var>{q};
  if (!gate.empty()) {
    mha.set_head_mask(gate);
    mha.set_gate_requires_grad(true);
    wrt.push_back(mha.head_gate());
  }
  return gradcheck(
      [&] {
        drop->set_position(0, 0);  // the same masks on every evaluation
        return mha.forward(q, k, v, masks ? &kpm : nullptr, masks ? &causal : nullptr).output;
      },
      plus_parameters(wrt, mha), options_for(seed));
}

// MultiHeadAttention with a learned additive score bias [h, T, S] (the attention_bias
// extension point), so the bias's gradient is checked with the rest.
class LearnedBiasAttention : public MultiHeadAttention {
 public:
  LearnedBiasAttention(const MultiHeadAttentionOptions& o, Rng& rng, int64_t t, int64_t s)
      : MultiHeadAttention(o, rng) {
    bias = register_parameter("bias", randn({o.heads, t, s}, rng));
  }
  Var bias;

 protected:
  Var attention_bias(int64_t, int64_t) override { return bias; }
};

GradcheckResult check_biased_mha(uint64_t seed) {
  Rng rng(seed);
  LearnedBiasAttention mha({4, 2}, rng, 3, 4);
  Var q(randn({2, 3, 4}, rng), true), k(randn({2, 4, 4}, rng), true),
      v(randn({2, 4, 4}, rng), true);
  const Tensor causal = causal_mask(3, 4);
  mha.set_gate_requires_grad(true);
  return gradcheck([&] { return mha.forward(q, k, v, nullptr, &causal).output; },
                   plus_parameters({q, k, v, mha.head_gate()}, mha), options_for(seed));
}

GradcheckResult check_encoder_layer(uint64_t seed, NormPosition norm, float dropout) {
  Rng rng(seed);
  auto drop = std::make_shared<SampleRng>(seed + 1);
  EncoderLayerOptions opt;
  opt.d_model = 4;
  opt.heads = 2;
  opt.d_ff = 6;
  opt.activation = Activation::gelu;
  opt.norm = norm;
  opt.dropout = dropout;
  opt.attn_dropout = dropout;
  EncoderLayer layer(opt, rng, drop);
  Var x(randn({2, 3, 4}, rng), true);
  const Tensor kpm = padding_mask(3);
  return gradcheck(
      [&] {
        drop->set_position(0, 0);  // the same masks on every evaluation
        return layer.forward(x, &kpm).output;
      },
      plus_parameters({x}, layer), options_for(seed));
}

GradcheckResult check_encoder(uint64_t seed, NormPosition norm, PositionKind positions) {
  Rng rng(seed);
  EncoderOptions opt;
  opt.vocab_sizes = {5, 3};
  opt.max_len = 4;
  opt.d_model = 4;
  opt.heads = 2;
  opt.layers = 2;
  opt.d_ff = 6;
  opt.num_classes = 3;
  opt.activation = Activation::gelu;
  opt.norm = norm;
  opt.positions = positions;
  opt.dropout = 0.1f;
  opt.attn_dropout = 0.1f;
  opt.dropout_seed = seed;
  Encoder model(opt, rng);
  const std::vector<int32_t> cat = {0, 4, 2, 2, 1, 3}, col = {1, 0, 2, 2, 0, 1};
  const std::span<const int32_t> feats[] = {cat, col};
  const Tensor kpm = padding_mask(3);
  return gradcheck(
      [&] {
        model.dropout_rng().set_position(0, 0);  // the same masks every time
        return model.forward(feats, 2, 3, &kpm).logits;
      },
      model.parameters(), options_for(seed));
}

// A causal, attention-only (d_ff = 0) encoder of two layers: the next-token models of the
// induction task. Gradients must not flow from a position into the keys after it.
GradcheckResult check_causal_attention_only(uint64_t seed) {
  Rng rng(seed);
  EncoderOptions opt;
  opt.vocab_sizes = {5};
  opt.max_len = 4;
  opt.d_model = 4;
  opt.heads = 2;
  opt.layers = 2;
  opt.d_ff = 0;
  opt.causal = true;
  opt.num_classes = 3;
  Encoder model(opt, rng);
  const std::vector<int32_t> ids = {0, 4, 2, 2, 1, 3, 1, 0};
  const std::span<const int32_t> feats[] = {ids};
  return gradcheck([&] { return model.forward(feats, 2, 4).logits; }, model.parameters(),
                   options_for(seed));
}

GradcheckResult check_feed_forward(uint64_t seed, Activation act, float p) {
  Rng rng(seed);
  auto drop = std::make_shared<SampleRng>(seed + 1);
  FeedForward ffn({4, 6, act, p}, rng, drop);
  Var x(randn({2, 3, 4}, rng), true);
  if (act == Activation::relu) {
    // Redraw until every hidden pre-activation is 0.05 or more from ReLU's kink; the
    // perturbations of gradcheck move them by a few eps (1e-3).
    NoGradGuard no_grad;
    for (int tries = 0; tries < 1000; ++tries) {
      const Tensor h = ffn.w1->forward(x).value();
      bool far = true;
      for (float v : h.span()) far = far && std::fabs(v) >= 0.05f;
      if (far) break;
      x.value().copy_(randn({2, 3, 4}, rng));
    }
  }
  return gradcheck(
      [&] {
        drop->set_position(0, 0);  // the same masks on every evaluation
        return ffn.forward(x);
      },
      plus_parameters({x}, ffn), options_for(seed));
}

}  // namespace

GradcheckResult gradcheck_sequence_layer(SequenceLayer& layer, int64_t d_model, uint64_t seed) {
  Rng rng(seed ^ 0x9e3779b97f4a7c15ULL);
  Var x(randn({2, 3, d_model}, rng), true);
  return gradcheck([&] { return layer.forward(x); }, plus_parameters({x}, layer),
                   options_for(seed));
}

std::vector<GradcheckCase> registry_gradcheck_cases() {
  std::vector<GradcheckCase> cases;
  for (const std::string& name : registered_layers())
    for (const LayerCheckCase& check : layer_check_cases(name)) {
      const std::string variant = check.options.empty() && check.variant == "from the registry"
                                      ? check.variant
                                      : "registry: " + check.variant;
      cases.push_back(layer_case(name, variant, [name, options = check.options](uint64_t seed) {
        const OptionMap inherited{
            {"d_model", 4}, {"heads", 2}, {"d_ff", 6}, {"max_len", 5}, {"activation", "gelu"}};
        Rng rng(seed);
        auto layer = make_layer(name, options, inherited, rng);
        return gradcheck_sequence_layer(*layer, 4, seed);
      }));
    }
  return cases;
}

std::vector<GradcheckCase> layer_gradcheck_cases() {
  std::vector<GradcheckCase> c;
  c.push_back(layer_case("linear", "3-D input", [](uint64_t seed) {
    Rng rng(seed);
    Linear lin({4, 3}, rng);
    Var x(randn({2, 3, 4}, rng), true);
    return gradcheck([&] { return lin.forward(x); }, plus_parameters({x}, lin), options_for(seed));
  }));
  c.push_back(layer_case("linear", "xavier, no bias, 2-D input", [](uint64_t seed) {
    Rng rng(seed);
    Linear lin({4, 5, false, Init::xavier_uniform}, rng);
    Var x(randn({3, 4}, rng), true);
    return gradcheck([&] { return lin.forward(x); }, plus_parameters({x}, lin), options_for(seed));
  }));
  c.push_back(layer_case("linear", "one Linear used twice (shared parameter)", [](uint64_t seed) {
    Rng rng(seed);
    Linear lin({4, 4}, rng);
    Var x(randn({2, 3, 4}, rng), true);
    return gradcheck([&] { return lin.forward(lin.forward(x)); }, plus_parameters({x}, lin),
                     options_for(seed));
  }));
  c.push_back(layer_case("embedding", "repeated ids", [](uint64_t seed) {
    Rng rng(seed);
    Embedding emb({6, 3, 1.0f}, rng);
    const std::vector<int32_t> ids = {0, 2, 2, 5, 1, 0};
    return gradcheck([&] { return emb.forward(ids, {2, 3}); }, emb.parameters(), options_for(seed));
  }));
  for (PositionKind kind : {PositionKind::learned, PositionKind::sinusoidal}) {
    const bool learned = kind == PositionKind::learned;
    c.push_back(layer_case("positional_encoding", learned ? "learned" : "sinusoidal",
                           [kind](uint64_t seed) {
                             Rng rng(seed);
                             PositionalEncoding pe({5, 4, kind, 1.0f}, rng);
                             Var x(randn({2, 3, 4}, rng), true);
                             return gradcheck([&] { return pe.forward(x); },
                                              plus_parameters({x}, pe), options_for(seed));
                           }));
  }
  for (bool affine : {true, false}) {
    c.push_back(layer_case("layer_norm", affine ? "affine" : "no affine", [affine](uint64_t seed) {
      Rng rng(seed);
      LayerNorm ln({4, 1e-5f, affine});
      if (affine) {  // away from the initial 1 and 0, so both gradients are exercised
        ln.weight.value().copy_(randn({4}, rng));
        ln.bias.value().copy_(randn({4}, rng));
      }
      Var x(randn({2, 3, 4}, rng), true);
      return gradcheck([&] { return ln.forward(x); }, plus_parameters({x}, ln), options_for(seed));
    }));
  }
  c.push_back(layer_case("dropout", "p 0.3, training", [](uint64_t seed) {
    auto drop = std::make_shared<SampleRng>(seed);
    Dropout d({0.3f}, drop);
    Rng rng(seed + 1);
    Var x(randn({2, 3, 4}, rng), true);
    return gradcheck(
        [&] {
          drop->set_position(0, 0);  // the same masks on every evaluation
          return d.forward(x);
        },
        {x}, options_for(seed));
  }));
  c.push_back(layer_case("feed_forward", "relu", [](uint64_t seed) {
    return check_feed_forward(seed, Activation::relu, 0.0f);
  }));
  c.push_back(layer_case("feed_forward", "gelu, activation dropout 0.2", [](uint64_t seed) {
    return check_feed_forward(seed, Activation::gelu, 0.2f);
  }));
  c.push_back(layer_case("softmax", "rows of 5", [](uint64_t seed) {
    Rng rng(seed);
    Softmax sm;
    Var x(randn({2, 3, 5}, rng), true);
    return gradcheck([&] { return sm.forward(x); }, {x}, options_for(seed));
  }));
  const MultiHeadAttentionOptions mha{4, 2};
  c.push_back(layer_case("multi_head_attention", "self", [mha](uint64_t seed) {
    return check_mha(seed, mha, false, false, {}, false);
  }));
  c.push_back(
      layer_case("multi_head_attention", "cross, padding and causal masks",
                 [mha](uint64_t seed) { return check_mha(seed, mha, true, true, {}, false); }));
  c.push_back(
      layer_case("multi_head_attention", "head gate (0.7, 0) with gradient", [mha](uint64_t seed) {
        return check_mha(seed, mha, true, true, {0.7f, 0.0f}, false);
      }));
  c.push_back(
      layer_case("multi_head_attention", "attention dropout 0.3, training", [](uint64_t seed) {
        return check_mha(seed, {4, 2, 0, 0.3f}, false, true, {}, true);
      }));
  c.push_back(layer_case("multi_head_attention", "3 heads of head_dim 2 (h*d != d_model)",
                         [](uint64_t seed) {
                           return check_mha(seed, {4, 3, 2}, true, false, {}, false);
                         }));
  c.push_back(
      layer_case("multi_head_attention", "learned score bias (attention_bias)", check_biased_mha));
  c.push_back(layer_case("encoder_layer", "pre-norm, padding mask", [](uint64_t seed) {
    return check_encoder_layer(seed, NormPosition::pre, 0.0f);
  }));
  c.push_back(layer_case("encoder_layer", "post-norm, dropout 0.2", [](uint64_t seed) {
    return check_encoder_layer(seed, NormPosition::post, 0.2f);
  }));
  c.push_back(layer_case("encoder", "pre-norm, learned positions, 2 layers", [](uint64_t seed) {
    return check_encoder(seed, NormPosition::pre, PositionKind::learned);
  }));
  c.push_back(layer_case("encoder", "post-norm, sinusoidal positions, 2 layers", [](uint64_t seed) {
    return check_encoder(seed, NormPosition::post, PositionKind::sinusoidal);
  }));
  c.push_back(layer_case("encoder", "causal, attention-only (d_ff 0), 2 layers",
                         check_causal_attention_only));
  for (auto& r : registry_gradcheck_cases()) c.push_back(std::move(r));
  return c;
}

}  // namespace headlab
