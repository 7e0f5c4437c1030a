#include "core/storage.h"

#include <cstdlib>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#include "core/error.h"

namespace headlab {
namespace {

constexpr size_t kAlignment = 64;
constexpr size_t kBucketFloats = kAlignment / sizeof(float);

// Free buffers by capacity. Node objects (Storage) are recycled with their buffers.
struct Pool {
  std::mutex mutex;
  std::unordered_map<size_t, std::vector<Storage*>> free;
  StoragePoolStats stats;
};

Pool& pool() {
  static Pool* p = new Pool();  // never destroyed: tensors may outlive static destruction order
  return *p;
}

size_t round_up(size_t n) {
  return (n + kBucketFloats - 1) / kBucketFloats * kBucketFloats;
}

}  // namespace

Storage* storage_acquire(size_t n) {
  const size_t capacity = round_up(n == 0 ? 1 : n);
  Pool& p = pool();
  {
    std::lock_guard lock(p.mutex);
    auto it = p.free.find(capacity);
    if (it != p.free.end() && !it->second.empty()) {
      Storage* s = it->second.back();
      it->second.pop_back();
      p.stats.cached_bytes -= capacity * sizeof(float);
      p.stats.live_bytes += capacity * sizeof(float);
      s->refs.store(1, std::memory_order_relaxed);
      return s;
    }
    p.stats.live_bytes += capacity * sizeof(float);
    ++p.stats.heap_allocations;
  }
  auto* data = static_cast<float*>(std::aligned_alloc(kAlignment, capacity * sizeof(float)));
  if (data == nullptr) {
    std::lock_guard lock(p.mutex);
    p.stats.live_bytes -= capacity * sizeof(float);
    throw std::bad_alloc();
  }
  auto* s = new Storage;
  s->data = data;
  s->capacity = capacity;
  s->refs.store(1, std::memory_order_relaxed);
  return s;
}

Storage* storage_wrap(float* data, size_t n, void (*release)(void* context), void* context) {
  if (release == nullptr) fail("storage: an external buffer needs a release function");
  auto* s = new Storage;
  s->data = data;
  s->capacity = n;
  s->release = release;
  s->release_context = context;
  s->refs.store(1, std::memory_order_relaxed);
  return s;
}

void storage_release(Storage* s) {
  if (s->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  if (s->release != nullptr) {
    s->release(s->release_context);
    delete s;
    return;
  }
  Pool& p = pool();
  std::lock_guard lock(p.mutex);
  p.stats.live_bytes -= s->capacity * sizeof(float);
  p.stats.cached_bytes += s->capacity * sizeof(float);
  p.free[s->capacity].push_back(s);
}

StoragePoolStats storage_pool_stats() {
  std::lock_guard lock(pool().mutex);
  return pool().stats;
}

void storage_pool_trim() {
  Pool& p = pool();
  std::lock_guard lock(p.mutex);
  for (auto& [capacity, list] : p.free) {
    for (Storage* s : list) {
      std::free(s->data);
      delete s;
    }
    p.stats.cached_bytes -= capacity * sizeof(float) * list.size();
    list.clear();
  }
}

}  // namespace headlab
