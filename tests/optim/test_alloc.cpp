// After the first step (which allocates the moments), an optimizer step, with clipping, the
// schedule and zero_grad, asks neither the heap nor the tensor pool for memory.

#include <doctest/doctest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "core/storage.h"
#include "optim/clip.h"
#include "optim/factory.h"
#include "tests/optim/quadratic.h"

// Counts every global operator new in this test binary (replacement functions; the counting
// is the only change).
namespace {
std::atomic<long> g_news{0};
}  // namespace

void* operator new(std::size_t n) {
  g_news.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) {
  return operator new(n);
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete[](void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
  std::free(p);
}

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
    const long news = g_news.load();
    for (int i = 0; i < 5; ++i) one_step();
    CHECK(g_news.load() == news);
    CHECK(storage_pool_stats().heap_allocations == pool.heap_allocations);
    CHECK(storage_pool_stats().live_bytes == pool.live_bytes);
  }
}
