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

namespace {
// Counts releases of a wrapped buffer (the Python module's keep-alive of a NumPy array).
void count_release(void* context) {
  ++*static_cast<int*>(context);
}
}  // namespace

TEST_CASE("core: a wrapped buffer is viewed in place and released once by its last tensor") {
  float external[6] = {1, 2, 3, 4, 5, 6};
  int releases = 0;
  const size_t live_before = storage_pool_stats().live_bytes;
  {
    Tensor t = Tensor::wrap({2, 3}, external, count_release, &releases);
    CHECK(t.data() == external);
    CHECK(storage_pool_stats().live_bytes == live_before);  // not the pool's memory
    t[4] = 50;
    CHECK(external[4] == 50);
    external[0] = 10;
    Tensor row = t.slice(1, 2);
    Tensor copy = t.clone();
    t = Tensor();
    CHECK(releases == 0);  // the row still views it
    CHECK(row[1] == 50);
    CHECK(copy[0] == 10);
    CHECK_FALSE(copy.data() == external);
  }
  CHECK(releases == 1);
  CHECK(storage_pool_stats().live_bytes == live_before);
  CHECK_THROWS_AS(Tensor::wrap({1}, external, nullptr, nullptr), Error);
}
