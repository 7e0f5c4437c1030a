// Replacements of the global operator new and delete that count allocations in any program that
// links this file (see bench/alloc_counter.h). Memory comes from malloc (or aligned_alloc for
// over-aligned requests) and goes back to free, as the default operators do.

#include "bench/alloc_counter.h"

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <new>

namespace {

std::atomic<int64_t> g_calls{0};

void* counted(std::size_t size, std::size_t alignment) noexcept {
  g_calls.fetch_add(1, std::memory_order_relaxed);
  if (size == 0) size = 1;
  if (alignment <= alignof(std::max_align_t)) return std::malloc(size);
  size = (size + alignment - 1) / alignment * alignment;  // aligned_alloc's requirement
  return std::aligned_alloc(alignment, size);
}

// The throwing forms loop on the new-handler as the standard requires.
void* counted_or_throw(std::size_t size, std::size_t alignment) {
  for (;;) {
    if (void* p = counted(size, alignment)) return p;
    std::new_handler handler = std::get_new_handler();
    if (handler == nullptr) throw std::bad_alloc();
    handler();
  }
}

}  // namespace

int64_t headlab::bench::operator_new_calls() {
  return g_calls.load(std::memory_order_relaxed);
}

void* operator new(std::size_t n) {
  return counted_or_throw(n, 0);
}
void* operator new[](std::size_t n) {
  return counted_or_throw(n, 0);
}
void* operator new(std::size_t n, std::align_val_t a) {
  return counted_or_throw(n, static_cast<std::size_t>(a));
}
void* operator new[](std::size_t n, std::align_val_t a) {
  return counted_or_throw(n, static_cast<std::size_t>(a));
}
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  return counted(n, 0);
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
  return counted(n, 0);
}
void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return counted(n, static_cast<std::size_t>(a));
}
void* operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return counted(n, static_cast<std::size_t>(a));
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
void operator delete(void* p, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete(void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}
void operator delete[](void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept {
  std::free(p);
}
