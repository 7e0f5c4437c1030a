// The fused ops equal the compositions they replace (ops.h names each one), values and every
// gradient, on every backend; and their gradients accumulate like any op's (a gradient that
// already holds a contribution gets the new one added, through every internal path).

#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "core/rng.h"
#include "tests/autograd/backend_scope.h"

using namespace headlab;
using headlab::test::BackendScope;
using headlab::test::kAllBackends;

namespace {

Tensor randn(const Shape& s, Rng& rng, float scale = 1.0f) {
  Tensor t = Tensor::empty(s);
  for (float& v : t.span()) v = scale * rng.normal();
  return t;
}

// max |a - b| / (1 + |b|)
double rel_diff(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  double w = 0.0;
  for (int64_t i = 0; i < a.numel(); ++i)
    w = std::max(w, std::fabs(double(a[i]) - b[i]) / (1.0 + std::fabs(double(b[i]))));
  return w;
}

// Runs f twice on fresh leaves holding the same values (fused, then composed), backpropagates
// the same projection, and compares outputs and the gradient of every leaf.
template <class Fused, class Composed>
void check_equal(const std::vector<Tensor>& inputs, Fused fused, Composed composed,
                 double tol = 2e-5) {
  auto run = [&](auto f, std::vector<Var>& leaves) {
    leaves.clear();
    for (const Tensor& t : inputs) leaves.emplace_back(t.clone(), true);
    Var y = f(leaves);
    Rng rng(99);
    y.backward(randn(y.shape(), rng));
    return y.value();
  };
  std::vector<Var> a, b;
  const Tensor ya = run(fused, a), yb = run(composed, b);
  CHECK(rel_diff(ya, yb) <= tol);
  for (size_t i = 0; i < inputs.size(); ++i) {
    INFO("gradient of input ", i);
    REQUIRE(a[i].has_grad());
    REQUIRE(b[i].has_grad());
    CHECK(rel_diff(a[i].grad(), b[i].grad()) <= tol);
  }
}

// The composed attention of MultiHeadAttention's generic path, on packed qkv [B, T, 3 h d].
Var composed_attention(const Var& qkv, int64_t h, float s, const Tensor* kpm, const Tensor* am,
                       float p, SampleRng* rng) {
  const int64_t b = qkv.size(0), t = qkv.size(1), hd = qkv.size(2) / 3;
  // Thirds of qkv by a matmul with 0/1 selectors (there is no slicing op).
  auto third = [&](int64_t k) {
    Tensor sel = Tensor::zeros({3 * hd, hd});
    for (int64_t i = 0; i < hd; ++i) sel[(k * hd + i) * hd + i] = 1.0f;
    return split_heads(matmul(qkv, Var(sel)), h);
  };
  Var scores = scale(batched_matmul(third(0), third(1), false, true), s);
  if (kpm) scores = masked_fill(scores, kpm->view({b, 1, 1, t}), -INFINITY);
  if (am) scores = masked_fill(scores, am->view({1, 1, t, t}), -INFINITY);
  Var w = softmax(scores);
  if (p > 0.0f) w = dropout(w, p, *rng, true);
  return merge_heads(batched_matmul(w, third(2)));
}

}  // namespace

TEST_CASE("autograd: linear equals matmul + add (+ relu) on every backend") {
  Rng rng(1);
  const Tensor x = randn({2, 5, 6}, rng), w = randn({7, 6}, rng, 0.5f), b = randn({7}, rng);
  for (Backend be : kAllBackends) {
    BackendScope scope(be);
    INFO(backend_name(be));
    for (bool relu : {false, true})
      check_equal(
          {x, w, b}, [&](auto& v) { return linear(v[0], v[1], v[2], relu); },
          [&](auto& v) {
            Var y = add(matmul(v[0], v[1], false, true), v[2]);
            return relu ? headlab::relu(y) : y;
          });
    check_equal(
        {x, w}, [](auto& v) { return linear(v[0], v[1], Var()); },
        [](auto& v) { return matmul(v[0], v[1], false, true); });
  }
}

TEST_CASE("autograd: add_layer_norm equals layer_norm of add, with and without affine") {
  Rng rng(4);
  const Tensor x = randn({3, 4, 8}, rng, 2.0f), r = randn({3, 4, 8}, rng),
               g = randn({8}, rng, 0.3f), b = randn({8}, rng);
  for (Backend be : kAllBackends) {
    BackendScope scope(be);
    INFO(backend_name(be));
    check_equal(
        {x, r, g, b}, [](auto& v) { return add_layer_norm(v[0], v[1], v[2], v[3]); },
        [](auto& v) { return layer_norm(add(v[0], v[1]), v[2], v[3]); }, 5e-5);
    check_equal(
        {x, r}, [](auto& v) { return add_layer_norm(v[0], v[1], Var(), Var()); },
        [](auto& v) { return layer_norm(add(v[0], v[1]), Var(), Var()); }, 5e-5);
  }
}

TEST_CASE("autograd: add_layer_norm adds into gradients that already hold a contribution") {
  Rng rng(5);
  Var x(randn({2, 6}, rng), true), r(randn({2, 6}, rng), true);
  // x and r each feed a second op, so their gradients are not fresh when the norm's arrives
  // (the tape runs the later op first): the norm must add, not overwrite.
  Var y = add(add_layer_norm(x, r, Var(), Var()), mul(x, r));
  y.backward(Tensor::full({2, 6}, 1.0f));
  Var x2(x.value().clone(), true), r2(r.value().clone(), true);
  Var y2 = add(layer_norm(add(x2, r2), Var(), Var()), mul(x2, r2));
  y2.backward(Tensor::full({2, 6}, 1.0f));
  CHECK(rel_diff(x.grad(), x2.grad()) <= 5e-5);
  CHECK(rel_diff(r.grad(), r2.grad()) <= 5e-5);
}

TEST_CASE("autograd: self_attention equals the composed attention, with masks and dropout") {
  Rng rng(6);
  const int64_t b = 2, t = 5, h = 2, d = 3;
  const Tensor qkv = randn({b, t, 3 * h * d}, rng);
  Tensor kpm = Tensor::zeros({b, t}), causal = Tensor::zeros({t, t});
  kpm[t] = 1.0f;  // batch 1's first key is padding: with causal, its query 0 sees no key
  for (int64_t i = 0; i < t; ++i)
    for (int64_t j = i + 1; j < t; ++j) causal[i * t + j] = 1.0f;
  const float scale = 1.0f / std::sqrt(float(d));
  for (Backend be : kAllBackends)
    for (int variant = 0; variant < 3; ++variant) {  // plain, masks, dropout
      BackendScope scope(be);
      INFO(backend_name(be), " variant ", variant);
      const Tensor* m1 = variant == 1 ? &kpm : nullptr;
      const Tensor* m2 = variant == 1 ? &causal : nullptr;
      const float p = variant == 2 ? 0.4f : 0.0f;
      check_equal(
          {qkv},
          [&](auto& v) {
            SampleRng drop(7);
            AttentionOptions o;
            o.heads = h;
            o.scale = scale;
            o.key_padding_mask = m1;
            o.attn_mask = m2;
            o.dropout = p;
            o.rng = &drop;
            return self_attention(v[0], o);
          },
          [&](auto& v) {
            SampleRng drop(7);  // the same keys: the same dropout mask
            return composed_attention(v[0], h, scale, m1, m2, p, &drop);
          },
          5e-5);
    }
}

TEST_CASE("autograd: fused ops name the op and the shapes in their errors") {
  Var x(Tensor::zeros({2, 3}), true), w(Tensor::zeros({4, 5}), true);
  CHECK_THROWS_WITH(linear(x, w, Var()), doctest::Contains("linear: input shape [2, 3]"));
  CHECK_THROWS_WITH(add_layer_norm(x, Var(Tensor::zeros({3, 2}), true), Var(), Var()),
                    doctest::Contains("add_layer_norm: r shape is [3, 2]"));
  AttentionOptions o;
  o.heads = 2;
  CHECK_THROWS_WITH(self_attention(Var(Tensor::zeros({1, 2, 9}), true), o),
                    doctest::Contains("self_attention: qkv shape [1, 2, 9]"));
}
