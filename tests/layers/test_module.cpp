#include <doctest/doctest.h>

#include "autograd/ops.h"
#include "core/error.h"
#include "layers/encoder.h"
#include "tests/layers/reference.h"

using namespace headlab;
using namespace headlab::testing;

namespace {

EncoderOptions small() {
  EncoderOptions o;
  o.vocab_sizes = {5};
  o.max_len = 4;
  o.d_model = 8;
  o.heads = 2;
  o.d_ff = 8;
  o.num_classes = 3;
  return o;
}

}  // namespace

TEST_CASE("layers: state_dict round trip reproduces the model") {
  Rng ra(1), rb(2);
  Encoder a(small(), ra), b(small(), rb);
  a.eval();
  b.eval();
  const std::vector<int32_t> ids = {0, 1, 2, 3, 4, 4, 3, 2};
  const Tensor ya = a.forward({ids}, 2, 4).logits.value().clone();
  CHECK(max_abs_diff(b.forward({ids}, 2, 4).logits.value(), ya) > 1e-4);
  StateDict state = a.state_dict();
  for (auto& t : state) t.tensor = t.tensor.clone();  // a snapshot, as a checkpoint would hold
  b.load_state_dict(state);
  CHECK(max_abs_diff(b.forward({ids}, 2, 4).logits.value(), ya) == 0.0);
  CHECK(state.size() == a.named_parameters().size());
}

TEST_CASE("layers: loading a mis-shaped state dict reports every problem and changes nothing") {
  Rng ra(1), rb(2);
  Encoder a(small(), ra), b(small(), rb);
  StateDict state = a.state_dict();
  for (auto& t : state) t.tensor = t.tensor.clone();
  // One missing, one unexpected, two mis-shaped.
  state.erase(state.begin() + 1);
  state.push_back({"layers.0.attn.w_x.weight", Tensor::zeros({8, 8})});
  for (auto& t : state) {
    if (t.name == "classifier.weight") t.tensor = Tensor::zeros({4, 8});
    if (t.name == "embeddings.0.weight") t.tensor = Tensor::zeros({6, 8});
  }
  const Tensor before = b.named_parameters()[0].var.value().clone();
  const std::string missing = b.named_parameters()[1].name;
  try {
    b.load_state_dict(state);
    FAIL("load_state_dict accepted a mis-shaped state dict");
  } catch (const Error& e) {
    const std::string msg = e.what();
    CHECK(msg.find("4 problems") != std::string::npos);
    CHECK(msg.find("missing '" + missing + "'") != std::string::npos);
    CHECK(msg.find("unexpected 'layers.0.attn.w_x.weight'") != std::string::npos);
    CHECK(msg.find("'classifier.weight' has shape [4, 8] but the model expects [3, 8]") !=
          std::string::npos);
    CHECK(msg.find("'embeddings.0.weight' has shape [6, 8]") != std::string::npos);
  }
  CHECK(max_abs_diff(b.named_parameters()[0].var.value(), before) == 0.0);
}

TEST_CASE("layers: train and eval reach every child, zero_grad clears every gradient") {
  Rng rng(3);
  Encoder model(small(), rng);
  model.eval();
  CHECK_FALSE(model.layer(0).attn->is_training());
  CHECK_FALSE(model.layer(0).ffn->is_training());
  model.train();
  CHECK(model.layer(0).norm2->is_training());
  const std::vector<int32_t> ids = {0, 1, 2, 3};
  std::vector<int32_t> labels = {0, 1, 2, 0};
  cross_entropy(model.forward({ids}, 1, 4).logits, labels).backward();
  int with_grad = 0;
  for (const auto& p : model.named_parameters()) with_grad += p.var.has_grad();
  CHECK(with_grad > 0);
  model.zero_grad();
  for (const auto& p : model.named_parameters())
    if (p.var.has_grad())
      for (float g : p.var.grad().span()) CHECK(g == 0.0f);
}
