#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "autograd/tape.h"
#include "core/error.h"
#include "layers/encoder.h"
#include "layers/layer_norm.h"
#include "layers/registry.h"
#include "tests/layers/reference.h"

using namespace headlab;
using namespace headlab::testing;

namespace {

EncoderOptions tiny_options() {
  EncoderOptions o;
  o.vocab_sizes = {7, 3};
  o.max_len = 6;
  o.d_model = 8;
  o.heads = 2;
  o.layers = 2;
  o.d_ff = 12;
  o.num_classes = 5;
  return o;
}

struct Batch {
  std::vector<int32_t> cat, col;
  int64_t b = 2, t = 5;
};

Batch make_batch(Rng& rng, const EncoderOptions& o, int64_t b = 2, int64_t t = 5) {
  Batch batch{{}, {}, b, t};
  for (int64_t i = 0; i < b * t; ++i) {
    batch.cat.push_back(static_cast<int32_t>(rng.below(o.vocab_sizes[0])));
    batch.col.push_back(static_cast<int32_t>(rng.below(o.vocab_sizes[1])));
  }
  return batch;
}

// Applies a LayerNorm / FeedForward slot by its reference formula.
Vec ref_norm(const SequenceLayer& norm, const Vec& x, int64_t d) {
  const auto& ln = dynamic_cast<const LayerNorm&>(norm);
  return ref_layer_norm(x, d, ln.weight.value(), ln.bias.value(), ln.options().eps);
}
Vec ref_ffn(const SequenceLayer& layer, const Vec& x) {
  const auto& ffn = dynamic_cast<const FeedForward&>(layer);
  Vec h = ref_linear(x, ffn.w1->weight.value(), &ffn.w1->bias.value());
  for (double& v : h) v = std::max(v, 0.0);
  return ref_linear(h, ffn.w2->weight.value(), &ffn.w2->bias.value());
}
Tensor to_tensor(const Vec& v, const Shape& shape) {
  Tensor t = Tensor::empty(shape);
  for (int64_t i = 0; i < t.numel(); ++i) t[i] = static_cast<float>(v[i]);
  return t;
}
Vec plus(const Vec& a, const Vec& b) {
  Vec c(a.size());
  for (size_t i = 0; i < a.size(); ++i) c[i] = a[i] + b[i];
  return c;
}

}  // namespace

TEST_CASE("layers: encoder_layer pre- and post-norm equal their formulas") {
  for (NormPosition norm : {NormPosition::pre, NormPosition::post}) {
    CAPTURE(norm == NormPosition::pre);
    Rng rng(21);
    EncoderLayerOptions o;
    o.d_model = 8;
    o.heads = 2;
    o.d_ff = 12;
    o.norm = norm;
    EncoderLayer layer(o, rng);
    const Shape shape{2, 4, 8};
    const Tensor x = randn(shape, rng);
    const Vec xv = to_vec(x);
    auto attn = [&](const Vec& in) {
      const Tensor t = to_tensor(in, shape);
      return ref_attention(*layer.attn, t, t, t, nullptr, nullptr, {1.0, 1.0}).output;
    };
    Vec y;
    if (norm == NormPosition::pre) {
      y = plus(xv, attn(ref_norm(*layer.norm1, xv, 8)));
      y = plus(y, ref_ffn(*layer.ffn, ref_norm(*layer.norm2, y, 8)));
    } else {
      y = ref_norm(*layer.norm1, plus(xv, attn(xv)), 8);
      y = ref_norm(*layer.norm2, plus(y, ref_ffn(*layer.ffn, y)), 8);
    }
    CHECK(max_abs_diff(layer.forward(Var(x)).output.value(), y) < 1e-4);
  }
  Rng rng(1);
  CHECK_THROWS_WITH_AS(parse_norm_position("sandwich", "model.norm"),
                       doctest::Contains("known: pre, post"), Error);
}

namespace {

// A norm without forward_sum: LN(x) without affine, written from ops.
class PlainNorm : public SequenceLayer {
 public:
  Var forward(const Var& x) override { return layer_norm(x, Var(), Var()); }
};
const LayerRegistrar plain_norm_registrar("test_plain_norm", LayerKind::norm, [](LayerOptions&) {
  return std::make_shared<PlainNorm>();
});

}  // namespace

TEST_CASE("layers: post-norm LayerNorm slots fuse the residual add, other norms get the sum") {
  for (const char* norm_layer : {"layer_norm", "test_plain_norm"}) {
    CAPTURE(norm_layer);
    Rng rng(5);
    EncoderLayerOptions o;
    o.d_model = 8;
    o.heads = 2;
    o.d_ff = 12;
    o.norm = NormPosition::post;
    o.norm_layer = {norm_layer, {}};
    EncoderLayer layer(o, rng);
    Tape tape;
    TapeScope scope(tape);
    Var x(randn({2, 3, 8}, rng), true);
    layer.forward(x);
    int fused = 0, adds = 0;
    for (size_t i = 0; i < tape.size(); ++i) {
      fused += std::string(tape.op_name(i)) == "add_layer_norm";
      adds += std::string(tape.op_name(i)) == "add";
    }
    // LayerNorm: norm(x + r) is one add_layer_norm op per slot; a norm without forward_sum
    // (test_plain_norm here) sees forward(add(x, r)).
    CHECK(fused == (std::string(norm_layer) == "layer_norm" ? 2 : 0));
    CHECK(adds == (std::string(norm_layer) == "layer_norm" ? 0 : 2));
  }
}

TEST_CASE("layers: encoder shapes, per-layer weights and parameter names") {
  Rng rng(1);
  EncoderOptions o = tiny_options();
  Encoder model(o, rng);
  Batch batch = make_batch(rng, o);
  EncoderOutput out = model.forward({batch.cat, batch.col}, batch.b, batch.t, nullptr, true);
  CHECK(out.logits.shape() == Shape{2, 5, 5});
  CHECK(out.hidden.shape() == Shape{2, 5, 8});
  REQUIRE(out.weights.size() == 2);
  for (const Var& w : out.weights) CHECK(w.shape() == Shape{2, 2, 5, 5});
  CHECK(model.forward({batch.cat, batch.col}, batch.b, batch.t).weights.empty());

  std::vector<std::string> names;
  for (const auto& p : model.named_parameters()) names.push_back(p.name);
  for (const char* expected :
       {"embeddings.0.weight", "embeddings.1.weight", "positions.weight",
        "layers.0.attn.in_proj_weight", "layers.0.attn.in_proj_bias", "layers.0.attn.w_o.bias",
        "layers.1.ffn.w1.weight", "layers.1.norm2.weight", "final_norm.bias", "classifier.weight"})
    CHECK_MESSAGE(std::find(names.begin(), names.end(), expected) != names.end(), expected);
  CHECK(names.front() == "embeddings.0.weight");
  CHECK(names.back() == "classifier.bias");

  o.norm = NormPosition::post;
  o.positions = PositionKind::sinusoidal;
  Encoder post(o, rng);
  for (const auto& p : post.named_parameters()) {
    CHECK(p.name.rfind("final_norm", 0) == std::string::npos);
    CHECK(p.name.rfind("positions", 0) == std::string::npos);
  }
}

TEST_CASE("layers: encoder input is the sum of feature embeddings and positions") {
  Rng rng(2);
  EncoderOptions o = tiny_options();
  o.layers = 0;
  o.norm = NormPosition::post;  // no final norm: hidden is the input sum itself
  Encoder model(o, rng);
  Batch batch = make_batch(rng, o);
  EncoderOutput out = model.forward({batch.cat, batch.col}, batch.b, batch.t);
  const auto params = model.named_parameters();
  const Tensor &e0 = params[0].var.value(), &e1 = params[1].var.value(),
               &pos = params[2].var.value();
  for (int64_t b = 0; b < batch.b; ++b)
    for (int64_t t = 0; t < batch.t; ++t)
      for (int64_t j = 0; j < 8; ++j) {
        const int64_t i = b * batch.t + t;
        const double expected =
            e0[batch.cat[i] * 8 + j] + e1[batch.col[i] * 8 + j] + pos[t * 8 + j];
        CHECK(out.hidden.value()[i * 8 + j] == doctest::Approx(expected));
      }
}

TEST_CASE("layers: encoder dropout masks are keyed by (step, sample, site), not by batch slot") {
  Rng rng(3);
  EncoderOptions o = tiny_options();
  o.dropout = 0.2f;
  o.attn_dropout = 0.3f;
  Encoder model(o, rng);
  Batch batch = make_batch(rng, o, 4, 5);
  auto logits = [&](int64_t first_row, int64_t rows) {
    const std::span<const int32_t> cat(batch.cat.data() + first_row * 5, rows * 5);
    const std::span<const int32_t> col(batch.col.data() + first_row * 5, rows * 5);
    return model.forward({cat, col}, rows, 5).logits.value().clone();
  };
  model.dropout_rng().set_position(7, 0);
  const Tensor a = logits(0, 4);
  const Tensor b = logits(0, 4);  // no new position: the sites go on counting
  CHECK(max_abs_diff(a, b) > 1e-4);
  model.dropout_rng().set_position(7, 0);
  CHECK(max_abs_diff(logits(0, 4), a) == 0.0);  // the same position: the same masks
  model.dropout_rng().set_position(8, 0);
  CHECK(max_abs_diff(logits(0, 4), a) > 1e-4);  // another step: other masks
  // Sentences 2 and 3 alone, told where they sit in the step's batch, get the masks they had
  // in the whole batch (up to the GEMMs' rounding at another row count).
  model.dropout_rng().set_position(7, 2);
  const Tensor tail = logits(2, 2);
  const int64_t per_sentence = 5 * o.num_classes;
  for (int64_t i = 0; i < 2 * per_sentence; ++i)
    CHECK(tail[i] == doctest::Approx(a[2 * per_sentence + i]).epsilon(1e-5));
  model.eval();
  const Tensor e1 = logits(0, 4);
  CHECK(max_abs_diff(logits(0, 4), e1) == 0.0);
}

TEST_CASE("layers: set_dropout(false) leaves a training-mode forward without dropout") {
  // The trainer's early dropout (model.dropout_steps) turns dropout off while training goes on:
  // the encoder's own dropout, each block's residual dropout and the attention's then drop
  // nothing, so the forward is the eval forward, and on again it drops as before.
  Rng rng(5);
  EncoderOptions o = tiny_options();
  o.dropout = 0.2f;
  o.attn_dropout = 0.3f;
  Encoder model(o, rng);
  Batch batch = make_batch(rng, o, 4, 5);
  auto logits = [&] {
    model.dropout_rng().set_position(3, 0);
    return model.forward({batch.cat, batch.col}, 4, 5).logits.value().clone();
  };
  const Tensor dropped = logits();
  model.eval();
  const Tensor eval = logits();
  model.train();
  model.set_dropout(false);
  CHECK(model.is_training());
  CHECK_FALSE(model.dropout_active());
  CHECK_FALSE(model.layer(0).attn->dropout_active());  // the children too
  CHECK(max_abs_diff(logits(), eval) == 0.0);
  model.set_dropout(true);
  CHECK(model.layer(0).attn->dropout_active());
  CHECK(max_abs_diff(logits(), dropped) == 0.0);
  CHECK(max_abs_diff(dropped, eval) > 1e-4);
}

TEST_CASE("layers: encoder evaluation under NoGradGuard records nothing") {
  Rng rng(4);
  EncoderOptions o = tiny_options();
  Encoder model(o, rng);
  model.eval();
  Batch batch = make_batch(rng, o);
  const size_t before = Tape::current().size();
  {
    NoGradGuard no_grad;
    EncoderOutput out = model.forward({batch.cat, batch.col}, 2, 5, nullptr, true);
    CHECK_FALSE(out.logits.requires_grad());
    CHECK(out.weights.size() == 2);
  }
  CHECK(Tape::current().size() == before);
}

TEST_CASE("layers: encoder head gates ablate and give importance per layer") {
  Rng rng(5);
  EncoderOptions o = tiny_options();
  Encoder model(o, rng);
  model.eval();
  Batch batch = make_batch(rng, o);
  const Tensor full = model.forward({batch.cat, batch.col}, 2, 5).logits.value().clone();
  const std::vector<float> off = {0.0f, 1.0f};
  model.attention(1).set_head_mask(off);
  CHECK(max_abs_diff(model.forward({batch.cat, batch.col}, 2, 5).logits.value(), full) > 1e-4);
  model.reset_head_gates();
  CHECK(max_abs_diff(model.forward({batch.cat, batch.col}, 2, 5).logits.value(), full) == 0.0);

  for (int64_t l = 0; l < model.num_layers(); ++l) model.attention(l).set_gate_requires_grad(true);
  std::vector<int32_t> labels(10, 1);
  cross_entropy(model.forward({batch.cat, batch.col}, 2, 5).logits, labels).backward();
  for (int64_t l = 0; l < model.num_layers(); ++l) {
    REQUIRE(model.head_gate(l).has_grad());
    CHECK(model.head_gate(l).grad().shape() == Shape{2});
  }
  CHECK_THROWS_WITH_AS(model.layer(2), doctest::Contains("has 2 layers"), Error);
}

TEST_CASE("layers: encoder rejects inconsistent options and inputs") {
  Rng rng(6);
  EncoderOptions o = tiny_options();
  Encoder model(o, rng);
  Batch batch = make_batch(rng, o);
  CHECK_THROWS_WITH_AS(model.forward({batch.cat}, 2, 5),
                       doctest::Contains("1 input features given but the model has 2"), Error);
  Batch longer = make_batch(rng, o, 1, 7);
  CHECK_THROWS_WITH_AS(model.forward({longer.cat, longer.col}, 1, 7),
                       doctest::Contains("max_len 6"), Error);
  o.heads = 3;
  CHECK_THROWS_WITH_AS(Encoder(o, rng), doctest::Contains("does not divide"), Error);
  o = tiny_options();
  o.vocab_sizes = {};
  CHECK_THROWS_WITH_AS(Encoder(o, rng), doctest::Contains("vocab_sizes"), Error);
}

namespace {

// Slot layers with a bug, registered by the cases below only (other tests list the registry).
// An ffn whose forward multiplies by a matrix of the wrong size (matmul fails inside it) ...
class MatmulBugFfn : public SequenceLayer {
 public:
  Var forward(const Var& x) override {
    return matmul(x, Var(Tensor::zeros({x.size(2) + 1, x.size(2)})));
  }
};
// ... and one that returns the wrong shape.
class ShapeBugFfn : public SequenceLayer {
 public:
  Var forward(const Var& x) override { return Var(Tensor::zeros({x.size(0), x.size(1), 3})); }
};

std::string forward_error(const EncoderOptions& o, NormPosition norm) {
  EncoderOptions with = o;
  with.norm = norm;
  Rng rng(9);
  Encoder model(with, rng);
  Batch batch = make_batch(rng, with);
  try {
    model.forward({batch.cat, batch.col}, batch.b, batch.t);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("layers: an error inside a slot names the module path and the layer, once") {
  register_layer("test_matmul_bug_ffn", LayerKind::feed_forward,
                 [](LayerOptions&) { return std::make_shared<MatmulBugFfn>(); });
  register_layer("test_shape_bug_ffn", LayerKind::feed_forward,
                 [](LayerOptions&) { return std::make_shared<ShapeBugFfn>(); });
  EncoderOptions o = tiny_options();
  for (NormPosition norm : {NormPosition::pre, NormPosition::post}) {
    o.ffn_layer = {"test_matmul_bug_ffn", {}};
    const std::string matmul_error = forward_error(o, norm);
    CHECK(matmul_error.starts_with("encoder.layers.0.ffn (test_matmul_bug_ffn): matmul: "));
    CHECK(matmul_error.find("(test_matmul_bug_ffn)", 30) == std::string::npos);  // once
    CHECK(matmul_error.find("encoder.layers", 1) == std::string::npos);
    o.ffn_layer = {"test_shape_bug_ffn", {}};
    CHECK(forward_error(o, norm) ==
          "encoder.layers.0.ffn (test_shape_bug_ffn): returned an output of shape [2, 5, 3], "
          "but the ffn slot's contract is the input's shape [2, 5, 8]");
  }
  unregister_layer("test_matmul_bug_ffn");
  unregister_layer("test_shape_bug_ffn");
}

TEST_CASE("layers: LayerError::within puts the parent in front of the path") {
  const LayerError e("attn", "talking_heads_attention", "matmul: inner dims differ");
  CHECK(std::string(e.what()) == "attn (talking_heads_attention): matmul: inner dims differ");
  const LayerError outer = e.within("encoder.layers.3");
  CHECK(std::string(outer.what()) ==
        "encoder.layers.3.attn (talking_heads_attention): matmul: inner dims differ");
  CHECK(outer.message() == "matmul: inner dims differ");
}
