// The ops new layers are built from (sigmoid, tanh, exp, log, sqrt, pow, div, sum/mean/max over
// a dim, concat, slice, where): values against the C library and plain loops, the shapes of
// keepdim, max's tie rule, masks that select everything or nothing, and the error messages.
// Their gradients are gradchecked with the other ops (autograd/checks/op_checks_elementwise.cpp,
// op_checks_dims.cpp).

#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "core/error.h"

using namespace headlab;

namespace {

Var input(const Shape& shape, std::initializer_list<float> values) {
  return Var(Tensor::from(shape, values), true);
}

// The gradient of sum(f(x)) with respect to x.
std::vector<float> grad_of_sum(const Var& x, const Var& y) {
  x.clear_grad();
  sum(y).backward();
  return x.grad().to_vector();
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("autograd: sigmoid, tanh, exp, log, sqrt and pow match the C library") {
  const std::vector<float> xs = {-100.0f, -3.0f, -0.5f, 0.0f, 0.5f, 3.0f, 100.0f};
  Var x(Tensor::from({7}, xs), true);
  const Tensor s = sigmoid(x).value(), t = tanh(x).value();
  for (size_t i = 0; i < xs.size(); ++i) {
    const double v = xs[i];
    CHECK(s[i] == doctest::Approx(1.0 / (1.0 + std::exp(-v))).epsilon(1e-6));
    CHECK(t[i] == doctest::Approx(std::tanh(v)).epsilon(1e-6));
  }
  CHECK(s[0] >= 0.0f);  // no overflow to NaN at the ends
  CHECK(s[6] == 1.0f);
  Var p = input({3}, {0.25f, 1.0f, 4.0f});
  const Tensor e = exp(p).value(), l = log(p).value(), r = sqrt(p).value();
  const Tensor q = pow(p, 1.5f).value();
  for (int i = 0; i < 3; ++i) {
    const double v = p.value()[i];
    CHECK(e[i] == doctest::Approx(std::exp(v)));
    CHECK(l[i] == doctest::Approx(std::log(v)));
    CHECK(r[i] == doctest::Approx(std::sqrt(v)));
    CHECK(q[i] == doctest::Approx(std::pow(v, 1.5)));
  }
  // x^0 is 1 with a zero gradient, also at 0; a non-integer power of a negative is NaN.
  Var z = input({2}, {0.0f, -2.0f});
  CHECK(pow(z, 0.0f).value().to_vector() == std::vector<float>{1.0f, 1.0f});
  CHECK(grad_of_sum(z, pow(z, 0.0f)) == std::vector<float>{0.0f, 0.0f});
  CHECK(std::isnan(pow(z, 0.5f).value()[1]));
  CHECK(grad_of_sum(z, pow(z, 2.0f)) == std::vector<float>{0.0f, -4.0f});
  CHECK(error_of([&] {
          pow(z, std::numeric_limits<float>::infinity());
        }).find("pow: the exponent is inf") != std::string::npos);
}

TEST_CASE("autograd: div broadcasts like mul and follows the quotient rule") {
  Var a = input({2, 2}, {1.0f, 2.0f, 3.0f, 4.0f});
  Var b = input({2}, {2.0f, -4.0f});
  Var y = div(a, b);
  CHECK(y.value().to_vector() == std::vector<float>{0.5f, -0.5f, 1.5f, -1.0f});
  sum(y).backward();
  CHECK(a.grad().to_vector() == std::vector<float>{0.5f, -0.25f, 0.5f, -0.25f});
  // d/db_j sum_r a_rj / b_j = -sum_r a_rj / b_j^2: -(1 + 3) / 4 and -(2 + 4) / 16.
  CHECK(b.grad()[0] == doctest::Approx(-1.0f));
  CHECK(b.grad()[1] == doctest::Approx(-0.375f));
}

TEST_CASE("autograd: sum, mean and max over a dim keep or drop it") {
  Var x(Tensor::empty({2, 3, 4}), true);
  for (int64_t i = 0; i < 24; ++i) x.value()[i] = static_cast<float>((i * 7) % 24);
  CHECK(sum(x, 1, true).shape() == Shape{2, 1, 4});
  CHECK(sum(x, 1).shape() == Shape{2, 4});
  CHECK(mean(x, -1).shape() == Shape{2, 3});
  CHECK(max(x, 0, true).shape() == Shape{1, 3, 4});
  CHECK(sum(input({3}, {1, 2, 3}), 0).shape() == Shape{1});
  const Tensor s = sum(x, 1).value(), m = mean(x, 1).value(), mx = max(x, 1).value();
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t k = 0; k < 4; ++k) {
      float total = 0, best = -1;
      for (int64_t t = 0; t < 3; ++t) {
        const float v = x.value()[(b * 3 + t) * 4 + k];
        total += v;
        best = std::max(best, v);
      }
      CHECK(s[b * 4 + k] == total);
      CHECK(m[b * 4 + k] == doctest::Approx(total / 3));
      CHECK(mx[b * 4 + k] == best);
    }
  CHECK(grad_of_sum(x, mean(x, 2)) == std::vector<float>(24, 0.25f));
}

TEST_CASE("autograd: max gives a tie's gradient to its first maximal element, and NaN wins") {
  Var x = input({4}, {1.0f, 3.0f, 3.0f, 2.0f});
  CHECK(max(x, 0).value()[0] == 3.0f);
  CHECK(grad_of_sum(x, max(x, 0)) == std::vector<float>{0, 1, 0, 0});
  Var m = input({2, 2}, {3.0f, 1.0f, 3.0f, 2.0f});  // a tie down column 0
  CHECK(grad_of_sum(m, max(m, 0)) == std::vector<float>{1, 0, 0, 1});
  Var n = input({3}, {1.0f, std::nanf(""), 5.0f});
  CHECK(std::isnan(max(n, 0).value()[0]));
  CHECK(grad_of_sum(n, max(n, 0)) == std::vector<float>{0, 1, 0});
}

TEST_CASE("autograd: concat and slice are inverse copies") {
  Var x(Tensor::empty({2, 5, 3}), true);
  for (int64_t i = 0; i < 30; ++i) x.value()[i] = static_cast<float>(i);
  Var head = slice(x, 1, 0, 2), tail = slice(x, -2, 2, 5);
  CHECK(head.shape() == Shape{2, 2, 3});
  CHECK(tail.value()[0] == 6.0f);  // x[0, 2, 0]
  Var back = concat({head, tail}, 1);
  CHECK(back.value().to_vector() == x.value().to_vector());
  CHECK(grad_of_sum(x, back) == std::vector<float>(30, 1.0f));
  CHECK(slice(x, 0, 1, 1).shape() == Shape{0, 5, 3});  // an empty range is allowed
  Var a = input({1, 2}, {1, 2}), b = input({2, 2}, {3, 4, 5, 6});
  CHECK(concat({a, b}, 0).value().to_vector() == std::vector<float>{1, 2, 3, 4, 5, 6});
}

TEST_CASE("autograd: where with all-true and all-false masks takes one input whole") {
  Var a = input({2, 2}, {1, 2, 3, 4}), b = input({2, 2}, {-1, -2, -3, -4});
  const Tensor all = Tensor::full({2, 2}, 1.0f), none = Tensor::zeros({2, 2});
  CHECK(where(all, a, b).value().to_vector() == a.value().to_vector());
  CHECK(where(none, a, b).value().to_vector() == b.value().to_vector());
  sum(where(all, a, b)).backward();
  CHECK(a.grad().to_vector() == std::vector<float>(4, 1.0f));
  CHECK(b.grad().to_vector() == std::vector<float>(4, 0.0f));
  const Tensor column = Tensor::from({1, 2}, {1, 0});  // broadcast over rows
  CHECK(where(column, a, b).value().to_vector() == std::vector<float>{1, -2, 3, -4});
}

TEST_CASE("autograd: the new ops name themselves and the shapes in their errors") {
  Var x(Tensor::zeros({2, 3}), true), y(Tensor::zeros({3, 3}), true);
  CHECK(error_of([&] { sum(x, 2); }) ==
        "sum: dim 2 is outside the dims of shape [2, 3] (expected -2 .. 1)");
  CHECK(error_of([&] {
          max(Var(Tensor::zeros({2, 0}), true), 1);
        }).find("max: dim 1 of shape") != std::string::npos);
  CHECK(error_of([&] {
          concat({x, y}, 1);
        }) == "concat: input 1 has shape [3, 3] but input 0 has [2, 3]: only dim 1 may differ");
  CHECK(error_of([&] { concat(std::vector<Var>(9, x), 0); }) ==
        "concat: 9 inputs given but expected 1 to 8");
  CHECK(error_of([&] { slice(x, 1, 2, 4); }).find("slice: [2, 4) is not a range of dim 1") !=
        std::string::npos);
  CHECK(error_of([&] { where(Tensor::zeros({2}), x, x); }) ==
        "where: shapes [2] and [2, 3] do not broadcast (dim -1: 2 vs 3; expected equal or 1)");
  CHECK(error_of([&] {
          where(Tensor::zeros({2, 3}), x, y);
        }) ==
        "where: shapes [2, 3] and [3, 3] do not broadcast (dim -2: 2 vs 3; expected equal or 1)");
  CHECK(error_of([&] { div(x, y); }).find("div: shapes [2, 3] and [3, 3] do not broadcast") !=
        std::string::npos);
}
