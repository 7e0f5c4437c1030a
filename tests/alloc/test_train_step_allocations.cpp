// After warm-up, the trainer's own step (train/run/step.h: the task's batch, the Encoder, the
// loss, backward, the reduction, clipping, the schedule and Adam) allocates nothing: no operator
// new and no new pooled buffer, in fp32 and, where the CPU has the instructions, bf16. The op-level
// test (test_step_allocations.cpp) does not pass through the Encoder or TrainStep, where a
// std::string past the short-string buffer or a per-step vector once allocated on every step.

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "bench/alloc_counter.h"
#include "core/kernels/kernels.h"
#include "core/storage.h"
#include "train/config/config.h"
#include "train/distributed/comm.h"
#include "train/run/model.h"
#include "train/run/step.h"

using namespace headlab;

TEST_CASE("alloc: the trainer's step of the flagship config allocates nothing once warm") {
  std::vector<std::string> precisions = {"fp32"};
  if (bf16_supported()) precisions.push_back("bf16");
  for (const std::string& precision : precisions) {
    CAPTURE(precision);
    const std::vector<std::string> sets = {"runtime.precision=\"" + precision + "\""};
    LocalComm comm;
    RunModel model(load_config("configs/dependency.toml", sets));
    TrainStep step(model, comm);
    int64_t s = 0;
    for (; s < 3; ++s) step(s);  // the warm-up fills the pool and the caches
    const int64_t calls = bench::operator_new_calls();
    const size_t pooled = storage_pool_stats().heap_allocations;
    for (; s < 8; ++s) step(s);
    CHECK(bench::operator_new_calls() - calls == 0);
    CHECK(storage_pool_stats().heap_allocations - pooled == 0);
  }
  set_precision(Precision::fp32);
}
