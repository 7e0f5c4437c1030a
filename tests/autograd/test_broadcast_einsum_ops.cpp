// expand, where and masked_fill with NumPy broadcasting, and einsum: values against plain loops,
// gradients summed over the repeats, and the one-line errors. Their gradients are gradchecked
// with the other ops (autograd/checks/op_checks_broadcast.cpp).

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "autograd/ops.h"
#include "core/error.h"

using namespace headlab;

namespace {

Var iota(const Shape& shape, float step = 1.0f) {
  Tensor t = Tensor::empty(shape);
  for (int64_t i = 0; i < t.numel(); ++i) t[i] = step * static_cast<float>(i);
  return Var(t, true);
}

}  // namespace

TEST_CASE("autograd: expand repeats size-1 and new dims and sums the gradient back") {
  const Var x = iota({3, 1});
  const Var y = expand(x, {2, 3, 4});
  REQUIRE(y.shape() == Shape{2, 3, 4});
  for (int b = 0; b < 2; ++b)
    for (int t = 0; t < 3; ++t)
      for (int d = 0; d < 4; ++d) CHECK(y.value()[(b * 3 + t) * 4 + d] == x.value()[t]);
  sum(y).backward();
  CHECK(x.grad().to_vector() == std::vector<float>{8, 8, 8});  // 2 * 4 repeats each
  CHECK(expand(x, {3, 5}).shape() == Shape{3, 5});
  CHECK(expand(x, {3, 1}).value().data() == x.value().data());  // already that shape: x itself
}

TEST_CASE("autograd: expand refuses a dim that is neither equal nor 1, and fewer dims") {
  const Var x = iota({2, 3});
  CHECK_THROWS_WITH_AS(expand(x, {4, 3}),
                       "expand: shape [2, 3] cannot be expanded to [4, 3] (dim 0: 2 vs 4; a dim "
                       "expands only from 1)",
                       Error);
  CHECK_THROWS_WITH_AS(expand(x, {3}), doctest::Contains("fewer dims"), Error);
  CHECK_THROWS_WITH_AS(expand(x, {2, 1}), doctest::Contains("(dim 1: 3 vs 1;"), Error);
}

TEST_CASE("autograd: where broadcasts mask, a and b together") {
  const Var a = iota({2, 1, 4});      // [2, 1, 4]
  const Var b = iota({3, 1}, -1.0f);  // [3, 1]
  Tensor mask = Tensor::from({3, 4}, {1, 0, 0, 1, 0, 1, 0, 1, 1, 1, 0, 0});
  const Var y = where(mask, a, b);  // [2, 3, 4]
  REQUIRE(y.shape() == Shape{2, 3, 4});
  for (int i = 0; i < 2; ++i)
    for (int t = 0; t < 3; ++t)
      for (int d = 0; d < 4; ++d)
        CHECK(y.value()[(i * 3 + t) * 4 + d] ==
              (mask[t * 4 + d] != 0 ? a.value()[i * 4 + d] : b.value()[t]));
  sum(y).backward();
  // a[i, 0, d] is taken where mask[t, d] for each t; b[t] where not, for 2 * 4 slots.
  CHECK(a.grad().to_vector() == std::vector<float>{2, 2, 0, 2, 2, 2, 0, 2});
  CHECK(b.grad().to_vector() == std::vector<float>{4, 4, 4});
  CHECK_THROWS_WITH_AS(where(Tensor::zeros(Shape{2}), iota({3}), iota({3})),
                       "where: shapes [2] and [3] do not broadcast (dim -1: 2 vs 3; expected "
                       "equal or 1)",
                       Error);
}

TEST_CASE("autograd: masked_fill takes a mask of lower rank, never one that grows x") {
  const Var x = iota({2, 3});
  const Tensor mask = Tensor::from({3}, {0, 1, 0});
  const Var y = masked_fill(x, mask, -7.0f);
  CHECK(y.value().to_vector() == std::vector<float>{0, -7, 2, 3, -7, 5});
  sum(y).backward();
  CHECK(x.grad().to_vector() == std::vector<float>{1, 0, 1, 1, 0, 1});
  CHECK_THROWS_WITH_AS(masked_fill(x, Tensor::zeros(Shape{4, 2, 3}), 0.0f),
                       "masked_fill: mask shape [4, 2, 3] does not broadcast to x shape [2, 3] "
                       "(dims aligned from the back; each equal or 1)",
                       Error);
}

TEST_CASE("autograd: einsum matches loops for attention scores, contractions and reorders") {
  const Var q = iota({2, 2, 3, 4}, 0.1f), k = iota({2, 2, 5, 4}, -0.05f);
  const Var s = einsum("bhtd,bhsd->bhts", q, k);
  REQUIRE(s.shape() == Shape{2, 2, 3, 5});
  for (int bh = 0; bh < 4; ++bh)
    for (int t = 0; t < 3; ++t)
      for (int j = 0; j < 5; ++j) {
        double dot = 0;
        for (int d = 0; d < 4; ++d)
          dot += q.value()[(bh * 3 + t) * 4 + d] * k.value()[(bh * 5 + j) * 4 + d];
        CHECK(s.value()[(bh * 3 + t) * 5 + j] == doctest::Approx(dot).epsilon(1e-5));
      }
  // "bij,bjk->kbi": a batched product with the output reordered.
  const Var a = iota({2, 3, 4}, 0.5f), b = iota({2, 4, 2}, 0.25f);
  const Var r = einsum("bij,bjk->kbi", a, b);
  REQUIRE(r.shape() == Shape{2, 2, 3});
  for (int kk = 0; kk < 2; ++kk)
    for (int bb = 0; bb < 2; ++bb)
      for (int i = 0; i < 3; ++i) {
        double dot = 0;
        for (int j = 0; j < 4; ++j)
          dot += a.value()[(bb * 3 + i) * 4 + j] * b.value()[(bb * 4 + j) * 2 + kk];
        CHECK(r.value()[(kk * 2 + bb) * 3 + i] == doctest::Approx(dot).epsilon(1e-5));
      }
  // "ijk,jl->il": k appears in a only and is summed first; "ij,ij->" is the full contraction.
  const Var x = iota({2, 3, 2}), w = iota({3, 4});
  const Var p = einsum("ijk,jl->il", x, w);
  for (int i = 0; i < 2; ++i)
    for (int l = 0; l < 4; ++l) {
      double total = 0;
      for (int j = 0; j < 3; ++j)
        for (int kk = 0; kk < 2; ++kk)
          total += x.value()[(i * 3 + j) * 2 + kk] * w.value()[j * 4 + l];
      CHECK(p.value()[i * 4 + l] == doctest::Approx(total));
    }
  const Var u = iota({2, 3});
  CHECK(einsum("ij,ij->", u, u).shape() == Shape{1});
  CHECK(einsum("ij,ij->", u, u).value()[0] == doctest::Approx(55.0));
  // Without "->": the letters seen once, sorted ("ij,jk" is "ij,jk->ik", "ba,ac" is "->bc").
  CHECK(einsum("ij,jk", u, w).value().to_vector() == matmul(u, w).value().to_vector());
  CHECK(einsum("ba,ac", u, w).shape() == Shape{2, 4});
}

TEST_CASE("autograd: einsum's errors name the equation and what is wrong") {
  const Var a = iota({2, 3}), b = iota({4, 5});
  const auto refuses = [&](const char* equation, const Var& x, const Var& y, const char* what) {
    INFO(equation);
    const std::string expected = std::string("einsum: equation '") + equation + "': " + what;
    CHECK_THROWS_WITH_AS(einsum(equation, x, y), doctest::Contains(expected.c_str()), Error);
  };
  refuses("ij,jk->ik", a, b, "letter 'j' is 3 in operand 0 (shape [2, 3]) but 4 in operand 1");
  refuses("ijk,kl->il", a, b, "operand 0 'ijk' has 3 letters but its shape [2, 3] has 2 dims");
  refuses("ij->ij", a, b, "expected two operands separated by one ','");
  refuses("ij,kl,mn->i", a, b, "expected two operands");
  refuses("ii,kl->kl", a, b, "letter 'i' repeats in operand 0 'ii'");
  refuses("ij,kl->iz", a, b, "output letter 'z' is in neither operand");
  refuses("ij,kl->ii", a, b, "letter 'i' repeats in the output 'ii'");
  refuses("...j,kl->kl", a, b, "operand 0 has an ellipsis");
  refuses("i1,kl->kl", a, b, "operand 0 has '1' (expected letters a-z, A-Z)");
  refuses("ij,kl->i->j", a, b, "'->' appears twice");
}
