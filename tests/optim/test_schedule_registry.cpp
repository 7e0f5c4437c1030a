// The schedule registry: the built-ins build through it unchanged bit for bit, a registered
// schedule is chosen by name with its declared options checked (unknown key, out of range), and
// a custom schedule's rate is checked at every step.

#include <doctest/doctest.h>

#include "core/error.h"
#include "optim/factory.h"
#include "optim/schedule_registry.h"

using namespace headlab;

namespace {

// Registers "test_step_decay" (halves the rate every `every` steps) for one test case.
struct Registered {
  Registered() {
    register_schedule(
        "test_step_decay",
        [](const ScheduleOptions& o, double lr) {
          const int64_t every = option_int(o.options, "every");
          return Schedule::custom("test_step_decay", [=](int64_t s) {
            return lr / static_cast<double>(int64_t{1} << ((s - 1) / every));
          });
        },
        {{"every", OptionSpec::integer(1, 1000).documented("Steps per halving."), int64_t{10}}});
  }
  ~Registered() { unregister_schedule("test_step_decay"); }
};

}  // namespace

TEST_CASE("optim: the built-in schedules through the registry equal their constructors") {
  CHECK(registered_schedules() ==
        std::vector<std::string>{"constant", "warmup_cosine", "warmup_inverse_sqrt"});
  const Schedule cosine =
      make_schedule({.warmup_steps = 7, .min_lr = 1e-4, .total_steps = 50}, 3e-3);
  const Schedule cosine_ref = Schedule::warmup_cosine(3e-3, 7, 50, 1e-4);
  const Schedule noam = make_schedule({.name = "warmup_inverse_sqrt", .warmup_steps = 5}, 2e-3);
  const Schedule noam_ref = Schedule::warmup_inverse_sqrt(2e-3, 5);
  for (int64_t s = 1; s <= 60; ++s) {
    CHECK(cosine.lr_at(s) == cosine_ref.lr_at(s));
    CHECK(noam.lr_at(s) == noam_ref.lr_at(s));
  }
  CHECK(cosine.name() == "warmup_cosine");
  CHECK_THROWS_WITH_AS(unregister_schedule("constant"), doctest::Contains("built-in"), Error);
  CHECK_THROWS_WITH_AS(make_schedule({.name = "constant", .options = {{"every", 3}}}, 1e-3),
                       doctest::Contains("unknown key schedule.options.every"), Error);
}

TEST_CASE("optim: a registered schedule is built by name with its declared options") {
  Registered registered;
  CHECK(has_schedule("test_step_decay"));
  const Schedule fallback = make_schedule({.name = "test_step_decay"}, 1.0);
  CHECK(fallback.lr_at(10) == 1.0);
  CHECK(fallback.lr_at(11) == 0.5);
  const Schedule every3 =
      make_schedule({.name = "test_step_decay", .options = {{"every", 3}}}, 1.0);
  CHECK(every3.lr_at(4) == 0.5);
  CHECK(every3.lr_at(7) == 0.25);
  CHECK(every3.lr_at(7) == every3.lr_at(7));  // pure: asking again gives the same
  CHECK(every3.kind() == Schedule::Kind::kCustom);
  CHECK_THROWS_WITH_AS(make_schedule({.name = "test_step_decay", .options = {{"every", 0}}}, 1.0),
                       doctest::Contains("schedule.options.every = 0 is out of range"), Error);
  CHECK_THROWS_WITH_AS(make_schedule({.name = "test_step_decay", .options = {{"evry", 2}}}, 1.0),
                       doctest::Contains("did you mean schedule.options.every?"), Error);
  CHECK_THROWS_WITH_AS(make_schedule({.name = "test_step_decay", .options = {{"every", 1.5}}}, 1.0),
                       doctest::Contains("schedule.options.every has type float"), Error);
  CHECK_THROWS_WITH_AS(
      register_schedule("test_step_decay",
                        [](const ScheduleOptions&, double lr) { return Schedule::constant(lr); }),
      doctest::Contains("already registered"), Error);
  CHECK_THROWS_WITH_AS(
      make_schedule({.name = "linear"}, 1.0),
      doctest::Contains(
          "expected one of: constant, warmup_inverse_sqrt, warmup_cosine, test_step_decay"),
      Error);
}

TEST_CASE("optim: a custom schedule's negative or non-finite rate is an error naming it") {
  const Schedule bad = Schedule::custom("falling", [](int64_t s) { return 1.0 - 0.5 * s; });
  CHECK(bad.lr_at(1) == 0.5);
  CHECK_THROWS_WITH_AS(bad.lr_at(3),
                       doctest::Contains("schedule falling: the learning rate of step 3 is -0.5"),
                       Error);
  CHECK_THROWS_WITH_AS(Schedule::custom("none", {}), doctest::Contains("empty"), Error);
}
