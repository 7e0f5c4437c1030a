#pragma once
// oneDNN plumbing for the onednn kernel backend (internal to core): one CPU engine, a stream per
// thread, and a thread-safe cache of primitives keyed by their full shape.
//
// Creating a oneDNN primitive costs milliseconds, so each distinct call shape creates one once.
// The cache entry also owns the primitive's argument memories (created without data, so a call
// only swaps data handles), its scratchpad (scratchpad_mode::user, so executing allocates
// nothing and entries never share a scratchpad across threads) and any small side buffers the
// kernel needs. A call then costs a hash lookup, a few pointer stores and dnnl_primitive_execute.
//
// Entries are never evicted: a training run has a handful of fixed shapes. Calls on the same
// entry from several threads take turns (the entry's mutex guards its memories and scratchpad);
// calls on different entries run concurrently.

#include <array>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <span>
#include <utility>
#include <vector>

#include <dnnl.hpp>

namespace headlab::onednn {

const dnnl::engine& engine();

enum class Op : uint32_t {
  matmul,
  softmax_fwd,
  softmax_bwd,
  log_softmax_fwd,
  log_softmax_bwd,
  layer_norm_fwd,
  layer_norm_bwd,
  eltwise_fwd,
  eltwise_bwd,
};

struct Key {
  Op op = Op::matmul;
  uint32_t flags = 0;  // op-specific bits (transposes, normalization flags, algorithm)
  int32_t threads = 0;
  float f0 = 0.0f, f1 = 0.0f;  // op-specific scalars (alpha and beta, epsilon)
  std::array<int64_t, 10> dims{};
  bool operator==(const Key&) const = default;
};

struct KeyHash {
  size_t operator()(const Key& k) const noexcept;
};

// The threads a primitive runs on: OpenMP's max-threads (set_num_threads), cut to what the work
// of `key` pays for, as headlab's own kernels do (fast::threads_for). A parallel region costs
// microseconds on an idle machine and a scheduler time slice (milliseconds) on a busy one, where
// one of its threads is not running and the others wait at the barrier: without the cut, the
// README's 200-step example ran 28x slower with two threads than with one beside a build. The
// count is part of every key (oneDNN fixes it when it creates a primitive), and the entry runs
// under it (Entry::execute sets OpenMP's count for the call).
int threads_for(const Key& key);

// A created primitive with its argument list.
class Entry {
 public:
  static constexpr int kMaxArgs = 10;

  // Creates the primitive from pd and one data-less memory per (argument, descriptor) pair, in
  // the order execute() takes their data pointers; adds pd's scratchpad when it needs one.
  using Arg = std::pair<int, dnnl::memory::desc>;
  void init(const dnnl::primitive_desc_base& pd, std::span<const Arg> args);
  void init(const dnnl::primitive_desc_base& pd, std::initializer_list<Arg> args) {
    init(pd, std::span<const Arg>(args.begin(), args.size()));
  }

  // Points the memories at `data` (same order as init's args) and runs the primitive on this
  // thread's stream. Serialised per entry; allocates nothing in this code (oneDNN's own
  // dnnl_primitive_execute builds a small argument map per call).
  void execute(std::span<const void* const> data);
  void execute(std::initializer_list<const void*> data) { execute({data.begin(), data.size()}); }

  // Side buffer owned by the entry, for data a kernel converts (e.g. variance from rstd). Use
  // only while holding lock().
  std::vector<float> buffer;
  std::mutex& lock() { return mutex_; }

  // The thread count it was created for (its key's); set by cached().
  int threads = 1;

 private:
  void execute_locked(std::span<const void* const> data);
  friend class EntryLock;

  dnnl::primitive primitive_;
  std::array<dnnl::memory, kMaxArgs + 1> memories_;
  std::array<dnnl_exec_arg_t, kMaxArgs + 1> args_{};
  int num_data_args_ = 0;
  int num_args_ = 0;
  std::mutex mutex_;
};

// Holds an entry's lock for a kernel that touches Entry::buffer around an execute.
class EntryLock {
 public:
  explicit EntryLock(Entry& e) : entry_(e), lock_(e.mutex_) {}
  void execute(std::span<const void* const> data) { entry_.execute_locked(data); }

 private:
  Entry& entry_;
  std::lock_guard<std::mutex> lock_;
};

Entry* find_entry(const Key& key);
// Stores a freshly made entry; if another thread stored one first, keeps that one and returns it.
Entry& insert_entry(const Key& key, std::unique_ptr<Entry> entry);
size_t cache_size();

// The cached entry for key, created by make(Entry&) on the first call.
// OpenMP's thread count for the calling thread set to n for a scope (a store when it is already
// n), so that oneDNN creates and runs a primitive on the count in its key.
class ScopedThreads {
 public:
  explicit ScopedThreads(int n);
  ~ScopedThreads();
  ScopedThreads(const ScopedThreads&) = delete;
  ScopedThreads& operator=(const ScopedThreads&) = delete;

 private:
  int saved_;
};

template <class Make>
Entry& cached(const Key& key, Make&& make) {
  if (Entry* e = find_entry(key)) return *e;
  auto fresh = std::make_unique<Entry>();
  fresh->threads = key.threads;
  {
    const ScopedThreads threads(key.threads);
    make(*fresh);
  }
  return insert_entry(key, std::move(fresh));
}

// A plain row-major f32 descriptor with the given dims and strides (packed when strides empty).
dnnl::memory::desc f32_desc(const dnnl::memory::dims& dims, const dnnl::memory::dims& strides = {});

// Attributes every cached primitive uses (user scratchpad), plus what the caller adds.
dnnl::primitive_attr base_attr();

// Creates `entry` as the matmul dst = src x weights (+ bias, a [1, n] row, when `with_bias`)
// under `attr`; its execute() then takes {src, weights, bias, dst}, or {src, weights, dst}.
void init_matmul(Entry& entry, const dnnl::memory::desc& src, const dnnl::memory::desc& weights,
                 const dnnl::memory::desc& bias, bool with_bias, const dnnl::memory::desc& dst,
                 const dnnl::primitive_attr& attr);

}  // namespace headlab::onednn
