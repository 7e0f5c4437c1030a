#include <doctest/doctest.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "core/error.h"
#include "core/threads.h"

using namespace headlab;

TEST_CASE("core: threads resolve a request against the CPUs this process may use") {
  CHECK(resolve_threads(0, 2) == 2);  // 0: all of them
  CHECK(resolve_threads(0, 1) == 1);
  CHECK(resolve_threads(0, 0) == 1);
  CHECK(resolve_threads(3, 2) == 3);  // a count the user gave is kept, even above the CPUs
  CHECK(resolve_threads(1, 64) == 1);
  CHECK_THROWS_WITH_AS(resolve_threads(-1, 2), "threads: -1 is negative (use 0 for all cores)",
                       Error);
  // taskset -c 0 on a 2-CPU machine: one CPU, not the two that are online.
  CHECK(usable_cpus(1, 2) == 1);
  CHECK(usable_cpus(2, 2) == 2);
  CHECK(usable_cpus(0, 8) == 8);  // the mask could not be read
  CHECK(usable_cpus(0, 0) == 1);
  CHECK(hardware_threads() >= 1);
}

TEST_CASE("core: libgomp's spinning is limited only where the environment chose no policy") {
  CHECK(openmp_spins_by_default(nullptr, nullptr));
  CHECK_FALSE(openmp_spins_by_default("passive", nullptr));
  CHECK_FALSE(openmp_spins_by_default("active", nullptr));  // the user's choice is kept
  CHECK_FALSE(openmp_spins_by_default(nullptr, "1000"));
  CHECK_FALSE(openmp_spins_by_default("", nullptr));  // set, if empty: libgomp read it
}

TEST_CASE("core: the library starts its sleeping team where libgomp would spin") {
  limit_openmp_spinning();
  if (!openmp_spins_by_default(std::getenv("OMP_WAIT_POLICY"), std::getenv("GOMP_SPINCOUNT")) ||
      hardware_threads() < 2) {
    CHECK_FALSE(openmp_spinning_limited());  // a policy chosen, or one CPU: nothing to do
    return;
  }
  // The team starts on a thread of its own; wait for it (a bound, not a timing).
  for (int i = 0; i < 3000 && !openmp_spinning_limited(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(openmp_spinning_limited());
  limit_openmp_spinning();  // once per process
  CHECK(openmp_spinning_limited());
}
