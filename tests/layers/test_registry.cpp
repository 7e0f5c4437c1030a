#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "autograd/ops.h"
#include "core/error.h"
#include "layers/encoder.h"
#include "layers/layer_checks.h"
#include "layers/registry.h"
#include "tests/layers/reference.h"

using namespace headlab;
using namespace headlab::testing;

namespace {

// A user's layer as it would be written outside the library: y = s0 * gain * LN(x) (no
// affine), with an option s0 so that options reach it.
class TestScaleNorm : public SequenceLayer {
 public:
  TestScaleNorm(int64_t d, float s0) : s0_(s0) {
    gain = register_parameter("gain", Tensor::full({d}, 1.0f));
  }
  Var forward(const Var& x) override { return scale(mul(layer_norm(x, Var(), Var()), gain), s0_); }
  Var gain;

 private:
  float s0_;
};

std::shared_ptr<SequenceLayer> make_test_scale_norm(LayerOptions& o) {
  const int64_t d = o.require_int("d_model");
  const float s0 = o.get_float("s0", 1.0f);
  return std::make_shared<TestScaleNorm>(d, s0);
}

const LayerRegistrar test_scale_norm_registrar("test_scale_norm", LayerKind::norm,
                                               make_test_scale_norm);

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// A value as the config loader gives it: with the positions of the value and of its key.
OptionValue at(OptionValue v, std::string where, std::string key_where = "") {
  v.where = std::move(where);
  v.key_where = std::move(key_where);
  return v;
}

}  // namespace

TEST_CASE("layers: the registry lists built-in and registered layers") {
  const auto names = registered_layers();
  for (const char* expected :
       {"dropout", "feed_forward", "layer_norm", "linear", "multi_head_attention",
        "positional_encoding", "softmax", "test_scale_norm"})
    CHECK_MESSAGE(std::find(names.begin(), names.end(), expected) != names.end(), expected);
  CHECK(std::is_sorted(names.begin(), names.end()));
  CHECK(has_layer("layer_norm"));
  CHECK_FALSE(has_layer("rms_nrom"));
}

TEST_CASE("layers: an unknown layer name is an error listing the known ones") {
  Rng rng(1);
  const std::string msg = error_of([&] { make_layer("rms_nrom", OptionMap{}, rng); });
  CHECK(msg.find("layers: unknown layer 'rms_nrom' (known: dropout, feed_forward, ") == 0);
  CHECK(msg.find("layer_norm") != std::string::npos);
}

TEST_CASE("layers: an unknown option key is an error listing the known keys and the place") {
  Rng rng(1);
  const OptionMap config{{"d_model", at(8, "model.cfg:1:11", "model.cfg:1:1")},
                         {"epss", at(1e-6, "model.cfg:2:8", "model.cfg:2:1")}};
  const std::string msg = error_of([&] { make_layer("layer_norm", config, rng); });
  CHECK(msg ==
        "layers: unknown option 'epss' for layer 'layer_norm' (model.cfg:2:1) (known: d_model, "
        "eps, affine)");
  // Without a key position the value's is named.
  const OptionMap no_key{{"d_model", 8}, {"epss", at(1e-6, "--set x:1:9")}};
  CHECK(error_of([&] { make_layer("layer_norm", no_key, rng); }).find("(--set x:1:9)") !=
        std::string::npos);
  const OptionMap two{{"d_model", 8}, {"x", 1}, {"y", 2}};
  CHECK(error_of([&] { make_layer("layer_norm", two, rng); }).find("unknown options 'x', 'y'") !=
        std::string::npos);
}

TEST_CASE("layers: a wrong option type or a missing required option names the key") {
  Rng rng(1);
  const OptionMap config{{"d_model", 8}, {"eps", at("small", "m.cfg:2:7")}};
  CHECK(error_of([&] { make_layer("layer_norm", config, rng); }) ==
        "layers: option 'eps' of layer 'layer_norm' is a string but expected a number "
        "(m.cfg:2:7)");
  CHECK(error_of([&] {
          make_layer("layer_norm", OptionMap{{"d_model", 8.5}}, rng);
        }).find("'d_model' of layer 'layer_norm' is a float but expected an integer") !=
        std::string::npos);
  CHECK(error_of([&] {
          make_layer("feed_forward", OptionMap{{"d_model", 8}}, rng);
        }) == "layers: layer 'feed_forward' needs option 'd_ff' (an integer)");
}

TEST_CASE("layers: own options override the values a slot inherits") {
  Rng rng(1);
  const OptionMap inherited{{"d_model", 8}, {"d_ff", 16}, {"heads", 2}};
  auto ffn = make_layer("feed_forward", OptionMap{{"d_ff", 10}}, inherited, rng);
  CHECK(dynamic_cast<FeedForward&>(*ffn).w1->weight.shape() == Shape{10, 8});
  auto mha = make_layer("multi_head_attention", OptionMap{}, inherited, rng);
  CHECK(dynamic_cast<MultiHeadAttention&>(*mha).heads() == 2);
}

TEST_CASE("layers: a layer registered in one line fills the encoder's norm slot") {
  Rng rng(1);
  EncoderOptions o;
  o.vocab_sizes = {6};
  o.max_len = 4;
  o.d_model = 8;
  o.heads = 2;
  o.d_ff = 8;
  o.num_classes = 3;
  o.norm_layer = {"test_scale_norm", OptionMap{{"s0", 2.0}}};
  Encoder model(o, rng);
  std::vector<std::string> names;
  for (const auto& p : model.named_parameters()) names.push_back(p.name);
  CHECK(std::find(names.begin(), names.end(), "layers.0.norm1.gain") != names.end());
  CHECK(std::find(names.begin(), names.end(), "final_norm.gain") != names.end());
  CHECK(dynamic_cast<TestScaleNorm*>(model.layer(0).norm2.get()) != nullptr);
  const std::vector<int32_t> ids = {0, 1, 2, 5};
  std::vector<int32_t> labels = {0, 1, 2, 0};
  cross_entropy(model.forward({ids}, 1, 4).logits, labels).backward();
  CHECK(model.named_parameters()[names.size() - 3].var.has_grad());  // final_norm.gain

  o.norm_layer = {"test_scale_norm", OptionMap{{"s1", 2.0}}};
  CHECK(error_of([&] { Encoder bad(o, rng); }) ==
        "layers: unknown option 's1' for layer 'test_scale_norm' (known: d_model, s0)");
  // The user's layer is gradchecked like the built-ins.
  auto layer = make_layer("test_scale_norm", OptionMap{{"d_model", 4}, {"s0", 1.5}}, rng);
  GradcheckResult r = gradcheck_sequence_layer(*layer, 4, 3);
  CHECK_MESSAGE(r.pass, r.worst);
}

TEST_CASE("layers: every slot takes layers of its kind only, naming the ones that fit") {
  Rng rng(1);
  EncoderOptions o;
  o.attention_layer = {"layer_norm", {}};
  CHECK(error_of([&] { Encoder bad(o, rng); }) ==
        "encoder_layer: layer 'layer_norm' is of kind norm, but the attention slot takes layers of "
        "kind attention: multi_head_attention");
  o = EncoderOptions{};
  o.norm_layer = {"dropout", {}};
  CHECK(error_of([&] { Encoder bad(o, rng); }) ==
        "encoder_layer: layer 'dropout' is of kind other, but the norm slot takes layers of kind "
        "norm: layer_norm, test_plain_norm, test_scale_norm");
  o = EncoderOptions{};
  o.ffn_layer = {"linear", {}};
  CHECK(error_of([&] { Encoder bad(o, rng); })
            .find("the ffn slot takes layers of kind "
                  "feed_forward: feed_forward") != std::string::npos);
  o = EncoderOptions{};
  o.positions_layer = {"softmax", {}};
  CHECK(error_of([&] { Encoder bad(o, rng); }) ==
        "encoder: layer 'softmax' is of kind other, but the positions slot takes layers of kind "
        "positions: positional_encoding");
  CHECK(layer_kind("multi_head_attention") == LayerKind::attention);
  CHECK(layer_kind("test_scale_norm") == LayerKind::norm);
  CHECK(registered_layers(LayerKind::other) ==
        std::vector<std::string>{"dropout", "linear", "softmax"});
  CHECK(std::string(layer_kind_name(LayerKind::feed_forward)) == "feed_forward");
}

TEST_CASE("layers: an attention-kind layer must still be a MultiHeadAttention") {
  register_layer("test_not_attention", LayerKind::attention, make_test_scale_norm);
  Rng rng(1);
  EncoderOptions o;
  o.attention_layer = {"test_not_attention", {}};
  CHECK(error_of([&] { Encoder bad(o, rng); }) ==
        "encoder_layer: layer 'test_not_attention' cannot fill the attention slot: it is not a "
        "MultiHeadAttention");
  unregister_layer("test_not_attention");
  CHECK_FALSE(has_layer("test_not_attention"));
  unregister_layer("test_not_attention");  // unknown: a no-op
}

TEST_CASE("layers: registering a name twice or an empty factory is an error") {
  CHECK_THROWS_WITH_AS(register_layer("layer_norm", LayerKind::norm, make_test_scale_norm),
                       doctest::Contains("'layer_norm' is already registered"), Error);
  CHECK_THROWS_WITH_AS(register_layer("nothing", LayerKind::norm, LayerFactory{}),
                       doctest::Contains("factory for 'nothing' is empty"), Error);
  CHECK_THROWS_WITH_AS(unregister_layer("layer_norm"),
                       doctest::Contains("'layer_norm' is a built-in layer"), Error);
}
