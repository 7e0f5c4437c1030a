#include <doctest/doctest.h>

#include "core/error.h"
#include "core/rng.h"
#include "core/tensor.h"

using namespace headlab;

TEST_CASE("core: tensor views share storage and check numel") {
  Tensor t = Tensor::from({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor v = t.view({3, 2});
  CHECK(v.shares_storage(t));
  v[0] = 10;
  CHECK(t[0] == 10);
  CHECK_THROWS_WITH_AS(t.view({4, 2}), doctest::Contains("[4, 2]"), Error);
  Tensor s = t.slice(1, 2);
  CHECK(s.shape() == Shape{1, 3});
  CHECK(s[0] == 4);
  CHECK(reinterpret_cast<uintptr_t>(Tensor::empty({3}).data()) % 64 == 0);
}

TEST_CASE("core: shape errors name both shapes") {
  CHECK_THROWS_WITH_AS(check_shape("linear", "input", Shape{2, 48}, Shape{2, 64}),
                       "linear: input shape is [2, 48] but expected [2, 64]", Error);
  CHECK_THROWS_AS(Shape({1, 1, 1, 1, 1, 1, 1}), Error);
}

TEST_CASE("core: rng same seed same stream, saved state resumes exactly") {
  Rng a(42), b(42);
  for (int i = 0; i < 100; ++i) CHECK(a.next_u64() == b.next_u64());
  const std::string saved = a.state_string();
  std::vector<float> expected;
  for (int i = 0; i < 10; ++i) expected.push_back(a.normal());
  Rng c(7);
  c.set_state(Rng::parse_state(saved));
  for (int i = 0; i < 10; ++i) CHECK(c.normal() == expected[i]);
  CHECK_THROWS_AS(Rng::parse_state("xoshiro256**:zz"), Error);
}

TEST_CASE("core: rng uniform and normal moments") {
  Rng r(1);
  double sum = 0, sum2 = 0, usum = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const double x = r.normal();
    sum += x;
    sum2 += x * x;
    const float u = r.uniform();
    REQUIRE(u >= 0.0f);
    REQUIRE(u < 1.0f);
    usum += u;
  }
  CHECK(sum / n == doctest::Approx(0.0).epsilon(0.01).scale(1));
  CHECK(sum2 / n == doctest::Approx(1.0).epsilon(0.01));
  CHECK(usum / n == doctest::Approx(0.5).epsilon(0.01));
  std::array<int, 5> counts{};
  for (int i = 0; i < 50000; ++i) ++counts[r.below(5)];
  for (int c : counts) CHECK(c == doctest::Approx(10000).epsilon(0.05));
}
