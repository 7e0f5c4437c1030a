// Schedules at chosen steps against their closed forms (schedule.h), and the warmup boundary.

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/error.h"
#include "optim/factory.h"
#include "optim/schedule.h"

using namespace headlab;

TEST_CASE("optim: constant schedule, with and without warmup") {
  const Schedule flat = Schedule::constant(3e-3);
  for (int64_t s : {1, 2, 100, 1000000}) CHECK(flat.lr_at(s) == 3e-3);
  const Schedule warm = Schedule::constant(1e-3, 10);
  CHECK(warm.lr_at(1) == doctest::Approx(1e-4));
  CHECK(warm.lr_at(5) == doctest::Approx(5e-4));
  CHECK(warm.lr_at(10) == 1e-3);
  CHECK(warm.lr_at(11) == 1e-3);
}

TEST_CASE("optim: warmup_inverse_sqrt follows the Transformer paper's formula") {
  const double lr = 2e-3;
  const int64_t w = 400;
  const Schedule sched = Schedule::warmup_inverse_sqrt(lr, w);
  // The paper's d_model^-0.5 * min(s^-0.5, s * w^-1.5), divided by its peak at s = w.
  auto paper = [&](double s) {
    return std::pow(64.0, -0.5) * std::min(std::pow(s, -0.5), s * std::pow(w, -1.5));
  };
  const double peak = paper(w);
  for (int64_t s : {1, 2, 37, 399, 400, 401, 1600, 10000})
    CHECK(sched.lr_at(s) == doctest::Approx(lr * paper(s) / peak).epsilon(1e-12));
  CHECK(sched.lr_at(1) > 0.0);
  CHECK(sched.lr_at(w) == doctest::Approx(lr).epsilon(1e-12));  // the peak
  CHECK(sched.lr_at(4 * w) == doctest::Approx(lr / 2).epsilon(1e-12));
  // Rising strictly before the boundary, falling strictly after it.
  CHECK(sched.lr_at(w - 1) < sched.lr_at(w));
  CHECK(sched.lr_at(w + 1) < sched.lr_at(w));

  // With d_model it is the paper's formula itself, lr acting as the factor.
  const Schedule literal = Schedule::warmup_inverse_sqrt(1.0, 4000, 512);
  for (int64_t s : {1, 4000, 20000})
    CHECK(literal.lr_at(s) == doctest::Approx(std::pow(512.0, -0.5) *
                                              std::min(std::pow(s, -0.5), s * std::pow(4000, -1.5)))
                                  .epsilon(1e-12));
}

TEST_CASE("optim: warmup_cosine rises linearly, then decays to min_lr at the last step") {
  const double lr = 3e-3, floor = 1e-4;
  const int64_t w = 100, n = 1000;
  const Schedule sched = Schedule::warmup_cosine(lr, w, n, floor);
  CHECK(sched.lr_at(1) == doctest::Approx(lr / w).epsilon(1e-12));
  CHECK(sched.lr_at(50) == doctest::Approx(lr / 2).epsilon(1e-12));
  CHECK(sched.lr_at(w) == doctest::Approx(lr).epsilon(1e-12));
  CHECK(sched.lr_at(w - 1) < sched.lr_at(w));
  CHECK(sched.lr_at(w + 1) < sched.lr_at(w));
  for (int64_t s : {101, 250, 550, 999}) {
    const double progress = double(s - w) / double(n - w);
    const double expected =
        floor + (lr - floor) * 0.5 * (1 + std::cos(std::numbers::pi * progress));
    CHECK(sched.lr_at(s) == doctest::Approx(expected).epsilon(1e-12));
  }
  CHECK(sched.lr_at(550) == doctest::Approx((lr + floor) / 2).epsilon(1e-12));  // half way
  CHECK(sched.lr_at(n) == floor);
  CHECK(sched.lr_at(n + 50) == floor);
  CHECK(sched.lr_at(n - 1) > floor);

  // Without warmup the first step is just below the peak.
  const Schedule cold = Schedule::warmup_cosine(1.0, 0, 10);
  CHECK(cold.lr_at(1) == doctest::Approx(0.5 * (1 + std::cos(std::numbers::pi / 10))));
  CHECK(cold.lr_at(10) == 0.0);
}

TEST_CASE("optim: schedules reject bad arguments") {
  CHECK_THROWS_WITH_AS(Schedule::constant(1e-3).lr_at(0), doctest::Contains("steps count from 1"),
                       Error);
  CHECK_THROWS_WITH_AS(Schedule::warmup_inverse_sqrt(1e-3, 0), doctest::Contains("warmup_steps"),
                       Error);
  CHECK_THROWS_WITH_AS(Schedule::warmup_cosine(1e-3, 100, 100),
                       doctest::Contains("total_steps is 100 but expected > warmup_steps"), Error);
  CHECK_THROWS_WITH_AS(Schedule::warmup_cosine(1e-3, 10, 100, 1e-2), doctest::Contains("min_lr"),
                       Error);
  CHECK_THROWS_WITH_AS(Schedule::warmup_cosine(NAN, 10, 100), doctest::Contains("lr"), Error);
}

TEST_CASE("optim: make_schedule builds each named schedule and lists the known names") {
  CHECK(make_schedule({.name = "constant"}, 1e-3).kind() == Schedule::Kind::kConstant);
  // The default is the config's: a cosine decay after 100 warmup steps, over the run's length.
  CHECK(make_schedule({.total_steps = 1000}, 1e-3).kind() == Schedule::Kind::kWarmupCosine);
  CHECK(make_schedule({.total_steps = 1000}, 1e-3).warmup_steps() == 100);
  const Schedule noam = make_schedule({.name = "warmup_inverse_sqrt", .warmup_steps = 10}, 1e-3);
  CHECK(noam.kind() == Schedule::Kind::kWarmupInverseSqrt);
  CHECK(noam.lr_at(10) == doctest::Approx(1e-3));
  const Schedule cosine = make_schedule(
      {.name = "warmup_cosine", .warmup_steps = 10, .min_lr = 1e-5, .total_steps = 50}, 1e-3);
  CHECK(cosine.kind() == Schedule::Kind::kWarmupCosine);
  CHECK(cosine.lr_at(50) == 1e-5);
  CHECK_THROWS_WITH_AS(make_schedule({.name = "cosine"}, 1e-3),
                       doctest::Contains("constant, warmup_inverse_sqrt, warmup_cosine"), Error);
}
