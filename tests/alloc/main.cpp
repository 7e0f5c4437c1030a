// The allocation-counting test binary: doctest's main plus replacements of the global operator
// new and delete that count every allocation. Deletes are not counted; memory comes from
// malloc / aligned_alloc and goes back to free.

#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <new>

#include "tests/alloc/alloc_counter.h"

namespace {

std::atomic<int64_t> g_calls{0};

void* counted(std::size_t size, std::size_t alignment) {
  g_calls.fetch_add(1, std::memory_order_relaxed);
  if (size == 0) size = 1;
  void* p = nullptr;
  if (alignment <= alignof(std::max_align_t)) {
    p = std::malloc(size);
  } else {
    size = (size + alignment - 1) / alignment * alignment;  // aligned_alloc's requirement
    p = std::aligned_alloc(alignment, size);
  }
  return p;
}

void* counted_or_throw(std::size_t size, std::size_t alignment) {
  void* p = counted(size, alignment);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

}  // namespace

int64_t headlab::test::operator_new_calls() {
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
