// permute, gelu_tanh, softplus, logsumexp and cumsum: values against plain double loops and
// known values, the stable paths (large and -inf inputs), and the error messages. Their
// gradients are gradchecked with the other ops (autograd/checks/op_checks*.cpp).

#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "core/error.h"

using namespace headlab;

namespace {

Var iota(const Shape& shape) {
  Tensor t = Tensor::empty(shape);
  for (int64_t i = 0; i < t.numel(); ++i) t[i] = static_cast<float>(i);
  return Var(t, true);
}

}  // namespace

TEST_CASE("autograd: permute moves every element to its permuted index") {
  const Var x = iota({2, 3, 4, 5});
  const Var y = permute(x, {2, 0, 3, 1});  // y[c, a, d, b] = x[a, b, c, d]
  CHECK(y.shape() == Shape{4, 2, 5, 3});
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 3; ++b)
      for (int c = 0; c < 4; ++c)
        for (int d = 0; d < 5; ++d)
          CHECK(y.value()[((c * 2 + a) * 5 + d) * 3 + b] ==
                x.value()[((a * 3 + b) * 4 + c) * 5 + d]);
  // Backward is the inverse permutation: a weighted sum sends each weight back to its element.
  Var w = iota({4, 2, 5, 3});
  sum(mul(y, w)).backward();
  const Var back = permute(w, {1, 3, 0, 2});
  CHECK(back.shape() == x.shape());
  CHECK(x.grad().to_vector() == back.value().to_vector());
  // permute(.., {0, 1, 3, 2}) is transpose; negative dims count from the back.
  const Var z = iota({2, 3, 4});
  CHECK(permute(z, {0, -1, -2}).value().to_vector() == transpose(z).value().to_vector());
}

TEST_CASE("autograd: permute refuses what is not a permutation of the dims") {
  const Var x = iota({2, 3});
  for (const std::vector<int>& dims : std::vector<std::vector<int>>{{0}, {0, 0}, {0, 2}, {1, 0, 2}})
    CHECK_THROWS_WITH_AS(permute(x, dims),
                         doctest::Contains("must be a permutation of the 2 dims of shape [2, 3]"),
                         Error);
}

TEST_CASE("autograd: gelu_tanh and softplus match their formulas and known values") {
  const std::vector<float> xs = {-100.0f, -3.0f, -0.5f, 0.0f, 1.0f, 4.0f, 100.0f};
  Var x(Tensor::from({7}, xs), true);
  const Tensor g = gelu_tanh(x).value(), s = softplus(x).value(), e = gelu(x).value();
  for (size_t i = 0; i < xs.size(); ++i) {
    const double v = xs[i];
    const double c = std::sqrt(2.0 / M_PI);
    CHECK(
        g[i] ==
        doctest::Approx(0.5 * v * (1.0 + std::tanh(c * (v + 0.044715 * v * v * v)))).epsilon(1e-6));
    CHECK(std::abs(g[i] - e[i]) < 1e-3);  // the tanh form stays close to the erf form
    CHECK(s[i] == doctest::Approx(v > 30 ? v : std::log1p(std::exp(v))).epsilon(1e-6));
  }
  CHECK(g[4] == doctest::Approx(0.8411920).epsilon(1e-6));  // PyTorch's gelu(1, "tanh")
  CHECK(std::isfinite(s[6]));                               // no overflow
  CHECK(s[0] >= 0.0f);
}

TEST_CASE("autograd: logsumexp is stable for large and masked inputs") {
  const float inf = std::numeric_limits<float>::infinity();
  Var x(Tensor::from({3, 3}, {1.0f, 2.0f, 3.0f, 1000.0f, 1001.0f, 999.0f, -inf, 0.5f, -inf}), true);
  const Var y = logsumexp(x, 1);
  CHECK(y.shape() == Shape{3});
  CHECK(y.value()[0] == doctest::Approx(std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0))));
  CHECK(y.value()[1] ==
        doctest::Approx(1001.0 + std::log(std::exp(-1.0) + 1.0 + std::exp(-2.0))).epsilon(1e-7));
  CHECK(y.value()[2] == doctest::Approx(0.5));
  sum(y).backward();
  const std::vector<float> g = x.grad().to_vector();
  CHECK(g[0] + g[1] + g[2] == doctest::Approx(1.0));  // softmax along the dim
  CHECK(g[6] == 0.0f);
  CHECK(g[7] == doctest::Approx(1.0));
  Var all_masked(Tensor::from({1, 2}, {-inf, -inf}), true);
  const Var m = logsumexp(all_masked, -1, true);
  CHECK(m.shape() == Shape{1, 1});
  CHECK(m.value()[0] == -inf);
  sum(m).backward();
  CHECK(all_masked.grad().to_vector() == std::vector<float>{0.0f, 0.0f});  // never NaN
  CHECK_THROWS_WITH_AS(logsumexp(x, 2), doctest::Contains("logsumexp: dim 2 is outside"), Error);
}

TEST_CASE("autograd: cumsum runs along its dim and its gradient runs back") {
  const Var x = iota({2, 3, 2});
  const Var y = cumsum(x, 1);
  CHECK(y.shape() == x.shape());
  CHECK(y.value().to_vector() == std::vector<float>{0, 1, 2, 4, 6, 9, 6, 7, 14, 16, 24, 27});
  sum(y).backward();  // element k of 3 is in 3 - k of the running sums
  CHECK(x.grad().to_vector() == std::vector<float>{3, 3, 2, 2, 1, 1, 3, 3, 2, 2, 1, 1});
  CHECK(cumsum(x, -1).value().to_vector() ==
        std::vector<float>{0, 1, 2, 5, 4, 9, 6, 13, 8, 17, 10, 21});
}

TEST_CASE("autograd: binary ops broadcast as NumPy does and sum the gradient back") {
  // a [2, 3, 1] over b [2, 1, 4] -> [2, 3, 4]: out[i, j, k] = a[i, j] + b[i, k].
  const Var a = iota({2, 3, 1});
  Var b(Tensor::from({2, 1, 4}, {0, 10, 20, 30, 40, 50, 60, 70}), true);
  const Var y = add(a, b);
  CHECK(y.shape() == Shape{2, 3, 4});
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k)
        CHECK(y.value()[(i * 3 + j) * 4 + k] == a.value()[i * 3 + j] + b.value()[i * 4 + k]);
  sum(mul(y, y)).backward();  // d/da = sum_k 2 y, d/db = sum_j 2 y
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 3; ++j) {
      float s = 0;
      for (int k = 0; k < 4; ++k) s += 2 * y.value()[(i * 3 + j) * 4 + k];
      CHECK(a.grad()[i * 3 + j] == doctest::Approx(s));
    }
    for (int k = 0; k < 4; ++k) {
      float s = 0;
      for (int j = 0; j < 3; ++j) s += 2 * y.value()[(i * 3 + j) * 4 + k];
      CHECK(b.grad()[i * 4 + k] == doctest::Approx(s));
    }
  }
  // [B, T, 1] over [B, T, D], the case a suffix rule refused, and a over a larger b.
  Var x = iota({2, 3, 4});
  Var w(Tensor::from({2, 3, 1}, {1, 2, 3, 4, 5, 6}), true);
  CHECK(mul(x, w).value()[5] == 5.0f * 2.0f);
  CHECK(sub(Var(Tensor::from({4}, {1, 1, 1, 1}), true), x).shape() == Shape{2, 3, 4});
  CHECK(div(x, w).value()[23] == doctest::Approx(23.0f / 6.0f));
}
