#pragma once
// Storage: a reference-counted, 64-byte aligned fp32 buffer.
//
// Buffers are recycled through a caching pool bucketed by size (like PyTorch's caching
// allocator): when the last reference goes, the buffer returns to the pool instead of the heap.
// A training step of fixed shapes therefore asks the heap for nothing after its first step.
//
// A Storage may instead view memory someone else owns (a NumPy array, for the Python module):
// storage_wrap() records a release function that runs once, when the last reference goes; such
// a buffer never enters the pool, and its alignment is whatever the owner's is (the kernels load
// unaligned).

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <utility>

namespace headlab {

struct Storage {
  float* data = nullptr;
  size_t capacity = 0;  // in floats, rounded up to the pool's bucket size
  std::atomic<int> refs{0};
  // External memory only: called with release_context when the last reference goes.
  void (*release)(void* context) = nullptr;
  void* release_context = nullptr;
};

// Returns a buffer of at least n floats with one reference, contents unspecified.
Storage* storage_acquire(size_t n);
void storage_release(Storage* s);
// A Storage with one reference over n floats at `data`, which the caller keeps valid until
// release(context) is called (exactly once, from the thread that drops the last reference).
// Not counted in the pool's statistics. release must not throw.
Storage* storage_wrap(float* data, size_t n, void (*release)(void* context), void* context);

struct StoragePoolStats {
  size_t live_bytes = 0;    // held by tensors now
  size_t cached_bytes = 0;  // free, kept for reuse
  size_t heap_allocations = 0;
};
StoragePoolStats storage_pool_stats();
// Returns every cached buffer to the heap.
void storage_pool_trim();

// Intrusive owning pointer to a Storage.
class StorageRef {
 public:
  StorageRef() = default;
  explicit StorageRef(Storage* s) : s_(s) {}  // adopts the reference
  StorageRef(const StorageRef& o) : s_(o.s_) {
    if (s_) s_->refs.fetch_add(1, std::memory_order_relaxed);
  }
  StorageRef(StorageRef&& o) noexcept : s_(std::exchange(o.s_, nullptr)) {}
  StorageRef& operator=(StorageRef o) noexcept {
    std::swap(s_, o.s_);
    return *this;
  }
  ~StorageRef() {
    if (s_) storage_release(s_);
  }
  Storage* get() const { return s_; }
  explicit operator bool() const { return s_ != nullptr; }

 private:
  Storage* s_ = nullptr;
};

}  // namespace headlab
