#include <doctest/doctest.h>

#include <optional>
#include <string>

#include "core/openmp_wait.h"
#include "core/threads.h"

using namespace headlab;

namespace {

// /proc/stat as Linux 6 prints it: the aggregate line, one line per CPU, then other counters.
constexpr const char* kStat =
    "cpu  300 10 60 900 20 0 5 5 0 0\n"
    "cpu0 100 0 20 500 10 0 0 0 0 0\n"
    "cpu1 200 10 40 400 10 0 5 5 0 0\n"
    "intr 12345 0 0\n"
    "ctxt 999\n"
    "cpu_something_else 1 2\n";

}  // namespace

TEST_CASE("core: openmp wait reads the ticks of the CPUs it may run on from /proc/stat") {
  const std::optional<CpuTicks> all = parse_cpu_ticks(kStat, {});
  REQUIRE(all.has_value());
  CHECK(all->cpus == 2);
  // busy: user nice system irq softirq steal; idle and iowait only in the total.
  CHECK(all->busy == 120 + 260);
  CHECK(all->total == 120 + 510 + 260 + 410);
  const std::optional<CpuTicks> one = parse_cpu_ticks(kStat, {1});
  REQUIRE(one.has_value());
  CHECK(one->cpus == 1);
  CHECK(one->busy == 260);
  CHECK(one->total == 670);
  // A kernel that prints only user nice system idle.
  const std::optional<CpuTicks> old = parse_cpu_ticks("cpu 4 0 1 5\ncpu0 4 0 1 5\n", {0});
  REQUIRE(old.has_value());
  CHECK(old->busy == 5);
  CHECK(old->total == 10);
  // A CPU of the mask without a line, a line that is not numbers, no CPU line at all.
  CHECK_FALSE(parse_cpu_ticks(kStat, {0, 2}).has_value());
  CHECK_FALSE(parse_cpu_ticks("cpu0 1 2 x 4\n", {}).has_value());
  CHECK_FALSE(parse_cpu_ticks("cpu0 1 2\n", {}).has_value());
  CHECK_FALSE(parse_cpu_ticks("intr 1 2 3\n", {}).has_value());
  CHECK_FALSE(parse_cpu_ticks("", {}).has_value());
}

TEST_CASE("core: openmp wait counts other work in cores and spins only where the CPUs are idle") {
  const CpuTicks before{.busy = 100, .total = 1000, .cpus = 2};
  CHECK(busy_cores(before, {.busy = 150, .total = 1100, .cpus = 2}) == doctest::Approx(1.0));
  CHECK(busy_cores(before, {.busy = 110, .total = 1100, .cpus = 2}) == doctest::Approx(0.2));
  CHECK(busy_cores(before, before) == 0.0);                                  // no tick passed
  CHECK(busy_cores(before, {.busy = 90, .total = 1100, .cpus = 2}) == 0.0);  // not a later read

  const OpenMPWait quiet = choose_openmp_wait(2, 0.25);
  CHECK(quiet.variable == "GOMP_SPINCOUNT");
  CHECK(quiet.value == std::to_string(kQuietSpinCount));
  CHECK(quiet.reason.find("idle") != std::string::npos);
  const OpenMPWait busy = choose_openmp_wait(2, kBusyCores);
  CHECK(busy.variable == "OMP_WAIT_POLICY");
  CHECK(busy.value == "passive");
  CHECK(busy.reason.find("other work") != std::string::npos);
  CHECK(choose_openmp_wait(2, std::nullopt).value == "passive");  // the load is unknown
  CHECK(choose_openmp_wait(1, 0.0).value == "passive");           // nothing waits on one CPU
}

TEST_CASE("core: openmp wait samples this process's CPUs") {
  const std::optional<double> busy = sample_busy_cores(20);
  REQUIRE(busy.has_value());  // Linux has /proc/stat
  CHECK(*busy >= 0.0);
  CHECK(*busy <= static_cast<double>(hardware_threads()));
}
