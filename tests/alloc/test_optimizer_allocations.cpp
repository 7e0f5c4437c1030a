// After the first step (which allocates the moments), an optimizer step, with clipping, the
// schedule and zero_grad, asks neither the heap nor the tensor pool for memory.

#include <doctest/doctest.h>

#include "bench/alloc_counter.h"
#include "core/storage.h"
#include "optim/clip.h"
#include "optim/factory.h"
#include "tests/optim/quadratic.h"

using namespace headlab;

TEST_CASE("optim: a warmed-up optimizer step allocates nothing") {
  for (const char* name : {"adam", "adamw", "sgd"}) {
    CAPTURE(name);
    test::Quadratic q;
    std::unique_ptr<Optimizer> opt = make_optimizer(
        {.name = name, .lr = 0.01, .momentum = name[0] == 's' ? 0.9 : 0.0}, q.params);
    const Schedule schedule =
        make_schedule({.name = "warmup_cosine", .warmup_steps = 2, .total_steps = 100}, 0.01);
    auto one_step = [&] {
      opt->set_lr(schedule.lr_at(opt->step_count() + 1));
      clip_grad_norm(opt->parameters(), 0.5);
      opt->step();
      opt->zero_grad();
    };
    q.set_grads();
    one_step();  // allocates the state
    const StoragePoolStats pool = storage_pool_stats();
    const int64_t news = bench::operator_new_calls();
    for (int i = 0; i < 5; ++i) one_step();
    CHECK(bench::operator_new_calls() == news);
    CHECK(storage_pool_stats().heap_allocations == pool.heap_allocations);
    CHECK(storage_pool_stats().live_bytes == pool.live_bytes);
  }
}
