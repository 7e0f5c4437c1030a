#include <doctest/doctest.h>

#include <cmath>

#include "autograd/ops.h"
#include "core/error.h"
#include "layers/dropout.h"
#include "layers/embedding.h"
#include "layers/feed_forward.h"
#include "layers/layer_norm.h"
#include "layers/linear.h"
#include "layers/positional_encoding.h"
#include "layers/softmax.h"
#include "tests/layers/reference.h"

using namespace headlab;
using namespace headlab::testing;

TEST_CASE("layers: linear computes x W^T + b with PyTorch's layout and init") {
  Rng rng(1);
  Linear lin({16, 4}, rng);
  CHECK(lin.weight.shape() == Shape{4, 16});
  CHECK(lin.bias.shape() == Shape{4});
  const float bound = 1.0f / 4.0f;  // 1/sqrt(16)
  float w_max = 0, b_max = 0;
  for (float v : lin.weight.value().span()) w_max = std::max(w_max, std::fabs(v));
  for (float v : lin.bias.value().span()) b_max = std::max(b_max, std::fabs(v));
  CHECK(w_max <= bound);
  CHECK(w_max > 0.5f * bound);  // 64 draws spread over the interval
  CHECK(b_max <= bound);
  CHECK(b_max > 0.0f);
  Tensor x = randn({2, 3, 16}, rng);
  Var y = lin.forward(Var(x));
  CHECK(y.shape() == Shape{2, 3, 4});
  CHECK(max_abs_diff(y.value(), ref_linear(to_vec(x), lin.weight.value(), &lin.bias.value())) <
        1e-5);

  Linear xavier({16, 4, true, Init::xavier_uniform}, rng);
  const float xb = std::sqrt(6.0f / 20.0f);
  float xw_max = 0;
  for (float v : xavier.weight.value().span()) xw_max = std::max(xw_max, std::fabs(v));
  CHECK(xw_max <= xb);
  CHECK(xw_max > bound);  // wider than the default bound: a different distribution
  for (float v : xavier.bias.value().span()) CHECK(v == 0.0f);

  Linear no_bias({16, 4, false}, rng);
  CHECK(no_bias.named_parameters().size() == 1);
  CHECK_THROWS_WITH_AS(lin.forward(Var(randn({2, 5}, rng))),
                       doctest::Contains("last dim 5 but in_features is 16"), Error);
}

TEST_CASE("layers: the same seed gives the same parameters") {
  Rng a(42), b(42), c(43);
  Linear la({8, 8}, a), lb({8, 8}, b), lc({8, 8}, c);
  CHECK(max_abs_diff(la.weight.value(), lb.weight.value()) == 0.0);
  CHECK(max_abs_diff(la.weight.value(), lc.weight.value()) > 0.0);
}

TEST_CASE("layers: embedding gathers rows, draws N(0, std) and rejects bad ids") {
  Rng rng(2);
  Embedding big({1000, 50, 0.5f}, rng);
  double sum = 0, sq = 0;
  for (float v : big.weight.value().span()) {
    sum += v;
    sq += v * v;
  }
  const double n = 50000, mean = sum / n, std = std::sqrt(sq / n - mean * mean);
  CHECK(std::fabs(mean) < 0.01);
  CHECK(std == doctest::Approx(0.5).epsilon(0.02));

  Embedding emb({5, 3}, rng);
  const std::vector<int32_t> ids = {4, 0, 4, 2};
  Var y = emb.forward(ids, {2, 2});
  CHECK(y.shape() == Shape{2, 2, 3});
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j) CHECK(y.value()[i * 3 + j] == emb.weight.value()[ids[i] * 3 + j]);
  const std::vector<int32_t> bad = {0, 5};
  CHECK_THROWS_AS(emb.forward(bad, {2}), Error);
  CHECK_THROWS_WITH_AS(emb.forward(ids, {3}), doctest::Contains("4 ids given"), Error);
}

TEST_CASE("layers: sinusoidal positions follow the paper, learned ones are added by row") {
  Rng rng(3);
  PositionalEncoding sin_pe({10, 6, PositionKind::sinusoidal}, rng);
  CHECK(sin_pe.named_parameters().empty());
  Var zeros(Tensor::zeros({2, 7, 6}));
  Var y = sin_pe.forward(zeros);
  CHECK(y.shape() == Shape{2, 7, 6});
  for (int b = 0; b < 2; ++b)
    for (int p = 0; p < 7; ++p)
      for (int i = 0; i < 3; ++i) {
        const double angle = p / std::pow(10000.0, 2.0 * i / 6.0);
        CHECK(y.value()[(b * 7 + p) * 6 + 2 * i] == doctest::Approx(std::sin(angle)));
        CHECK(y.value()[(b * 7 + p) * 6 + 2 * i + 1] == doctest::Approx(std::cos(angle)));
      }

  PositionalEncoding learned({10, 6, PositionKind::learned, 0.5f}, rng);
  CHECK(learned.weight.shape() == Shape{10, 6});
  Tensor x = randn({2, 4, 6}, rng);
  Var z = learned.forward(Var(x));
  for (int b = 0; b < 2; ++b)
    for (int i = 0; i < 24; ++i)
      CHECK(z.value()[b * 24 + i] == doctest::Approx(x[b * 24 + i] + learned.weight.value()[i]));
  CHECK_THROWS_WITH_AS(learned.forward(Var(Tensor::zeros({1, 11, 6}))),
                       doctest::Contains("T <= max_len 10"), Error);
  CHECK_THROWS_WITH_AS(parse_position_kind("rotary", "model.positions"),
                       doctest::Contains("known: learned, sinusoidal"), Error);
}

TEST_CASE("layers: layer_norm normalises the last dim with gain 1 and bias 0 at init") {
  Rng rng(4);
  LayerNorm ln({5});
  for (float v : ln.weight.value().span()) CHECK(v == 1.0f);
  for (float v : ln.bias.value().span()) CHECK(v == 0.0f);
  ln.weight.value().copy_(randn({5}, rng));
  ln.bias.value().copy_(randn({5}, rng));
  Tensor x = randn({3, 2, 5}, rng, 3.0f);
  Var y = ln.forward(Var(x));
  CHECK(max_abs_diff(y.value(), ref_layer_norm(to_vec(x), 5, ln.weight.value(), ln.bias.value(),
                                               1e-5)) < 1e-5);
  CHECK(LayerNorm({5, 1e-5f, false}).named_parameters().empty());
  CHECK_THROWS_WITH_AS(ln.forward(Var(x.view({3, 5, 2}))),
                       doctest::Contains("last dim 2 but dim is 5"), Error);
}

TEST_CASE("layers: dropout is the identity in eval and inverted dropout in training") {
  Rng rng(5);
  Dropout d({0.25f}, std::make_shared<SampleRng>(6));
  Tensor x = Tensor::full({100, 100}, 2.0f);
  d.eval();
  CHECK(max_abs_diff(d.forward(Var(x)).value(), x) == 0.0);
  d.train();
  const Tensor y = d.forward(Var(x)).value();
  int zeros = 0;
  for (float v : y.span()) {
    if (v == 0.0f)
      ++zeros;
    else
      CHECK(v == doctest::Approx(2.0f / 0.75f));
  }
  CHECK(zeros / 10000.0 == doctest::Approx(0.25).epsilon(0.1));
  CHECK_THROWS_WITH_AS(Dropout({1.0f}), doctest::Contains("must be in [0, 1)"), Error);
}

TEST_CASE("layers: feed_forward equals W2 act(W1 x + b1) + b2") {
  for (Activation act : {Activation::relu, Activation::gelu}) {
    Rng rng(6);
    FeedForward ffn({4, 7, act}, rng);
    CHECK(ffn.w1->weight.shape() == Shape{7, 4});
    CHECK(ffn.w2->weight.shape() == Shape{4, 7});
    Tensor x = randn({2, 3, 4}, rng);
    Vec h = ref_linear(to_vec(x), ffn.w1->weight.value(), &ffn.w1->bias.value());
    for (double& v : h)
      v = act == Activation::relu ? std::max(v, 0.0)
                                  : 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
    Vec y = ref_linear(h, ffn.w2->weight.value(), &ffn.w2->bias.value());
    CHECK(max_abs_diff(ffn.forward(Var(x)).value(), y) < 1e-5);
  }
  CHECK_THROWS_WITH_AS(parse_activation("swish", "model.activation"),
                       doctest::Contains("known: relu, gelu"), Error);
}

TEST_CASE("layers: softmax layer rows sum to 1") {
  Rng rng(7);
  Softmax sm;
  Var y = sm.forward(Var(randn({3, 6}, rng)));
  for (int r = 0; r < 3; ++r) {
    double s = 0;
    for (int j = 0; j < 6; ++j) s += y.value()[r * 6 + j];
    CHECK(s == doctest::Approx(1.0));
  }
}

TEST_CASE("layers: a parameter used twice accumulates both gradients") {
  Rng rng(8);
  Linear lin({3, 3}, rng);
  Var x1(randn({2, 3}, rng)), x2(randn({2, 3}, rng));
  sum(lin.forward(x1)).backward();
  const Tensor g1 = lin.weight.grad().clone();
  lin.zero_grad();
  sum(lin.forward(x2)).backward();
  const Tensor g2 = lin.weight.grad().clone();
  lin.zero_grad();
  sum(add(lin.forward(x1), lin.forward(x2))).backward();
  for (int i = 0; i < 9; ++i) CHECK(lin.weight.grad()[i] == doctest::Approx(g1[i] + g2[i]));
  // Without zero_grad a second backward adds to the first.
  sum(lin.forward(x1)).backward();
  for (int i = 0; i < 9; ++i) CHECK(lin.weight.grad()[i] == doctest::Approx(2 * g1[i] + g2[i]));
}
