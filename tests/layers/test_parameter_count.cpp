// Parameter counts from options (the memory estimate's source) against the built layers.

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "layers/encoder.h"
#include "layers/registry.h"

using namespace headlab;

namespace {

int64_t built_count(const Module& m) {
  int64_t n = 0;
  for (const NamedParameter& p : m.named_parameters()) n += p.var.numel();
  return n;
}

}  // namespace

TEST_CASE("layers: every built-in layer's counter equals the built layer's parameters") {
  const OptionMap inherited{{"d_model", 8}, {"heads", 2}, {"d_ff", 12}, {"max_len", 5}};
  const std::vector<std::pair<std::string, OptionMap>> cases = {
      {"dropout", {}},
      {"softmax", {}},
      {"layer_norm", {}},
      {"layer_norm", {{"affine", false}}},
      {"feed_forward", {}},
      {"feed_forward", {{"bias", false}, {"d_ff", 7}}},
      {"linear", {}},
      {"linear", {{"in_features", 3}, {"out_features", 5}, {"bias", false}}},
      {"multi_head_attention", {}},
      {"multi_head_attention", {{"head_dim", 3}, {"heads", 3}}},
      {"multi_head_attention", {{"bias", false}}},
      {"positional_encoding", {}},
      {"positional_encoding", {{"kind", "sinusoidal"}}},
  };
  for (const auto& [name, own] : cases) {
    Rng rng(1);
    const auto layer = make_layer(name, own, inherited, rng);
    CHECK_MESSAGE(layer_parameter_count({name, own}, inherited) == built_count(*layer), name);
  }
}

TEST_CASE("layers: the encoder's parameter count equals the built model's, exactly") {
  EncoderOptions base;
  base.vocab_sizes = {17, 4};
  std::vector<EncoderOptions> variants(6, base);
  variants[1].norm = NormPosition::post;  // no final norm
  variants[2].positions = PositionKind::sinusoidal;
  variants[3].head_dim = 5;
  variants[3].layers = 3;
  variants[4].ffn_layer = {"feed_forward", {{"bias", false}}};
  variants[4].norm_layer = {"layer_norm", {{"affine", false}}};
  variants[5].vocab_sizes = {65};
  variants[5].num_classes = 27;
  for (size_t i = 0; i < variants.size(); ++i) {
    Rng rng(3);
    const Encoder model(variants[i], rng);
    CHECK_MESSAGE(Encoder::parameter_count(variants[i]) == built_count(model), i);
  }
}

TEST_CASE("layers: a registered layer without a counter is counted by building it once") {
  // test_scale_norm (test_registry.cpp) is registered without a counter: gain [d_model].
  EncoderOptions o;
  o.vocab_sizes = {6};
  o.norm_layer = {"test_scale_norm", {{"s0", 2.0}}};
  Rng rng(1);
  const Encoder model(o, rng);
  CHECK(Encoder::parameter_count(o) == built_count(model));
  CHECK(layer_parameter_count(o.norm_layer, {{"d_model", 8}}) == 8);
}
