#include "core/kernels/onednn_cache.h"

#include <omp.h>

#include <algorithm>
#include <bit>
#include <unordered_map>

#include "core/error.h"
#include "core/kernels/fast.h"
#include "core/threads.h"

namespace headlab::onednn {
namespace {

// The engine is the first member so that it is destroyed after the entries' primitives and
// memories at exit.
struct Cache {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  std::mutex mutex;
  std::unordered_map<Key, std::unique_ptr<Entry>, KeyHash> entries;
};

Cache& cache() {
  static Cache c;
  return c;
}

// oneDNN's CPU stream executes synchronously on the calling thread; one per thread keeps
// concurrent callers from sharing stream state.
dnnl_stream_t thread_stream() {
  thread_local dnnl::stream s(engine());
  return s.get();
}

}  // namespace

const dnnl::engine& engine() {
  return cache().engine;
}

int threads_for(const Key& key) {
  // dims: m, n, k, ..., batch (0 for one item)
  if (key.op == Op::matmul) {
    constexpr double kMinFlopsPerThread = 2e6;  // as headlab's GEMM (simd/gemm.cpp)
    const double flops = 2.0 * static_cast<double>(key.dims[0] * key.dims[1]) *
                         static_cast<double>(key.dims[2] * std::max<int64_t>(1, key.dims[6]));
    return std::max(1, std::min(kernel_threads(), static_cast<int>(flops / kMinFlopsPerThread)));
  }
  // The others are row-wise or element-wise: dims are the rows and columns (or the length).
  int64_t elements = 1;
  for (int64_t d : key.dims)
    if (d > 0) elements *= d;
  return fast::threads_for(elements);
}

ScopedThreads::ScopedThreads(int n) : saved_(omp_get_max_threads()) {
  if (n != saved_) omp_set_num_threads(n);
}

ScopedThreads::~ScopedThreads() {
  if (omp_get_max_threads() != saved_) omp_set_num_threads(saved_);
}

size_t KeyHash::operator()(const Key& k) const noexcept {
  // FNV-1a over the fields (not the bytes: the struct has padding).
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xffu;
      h *= 1099511628211ull;
    }
  };
  mix(static_cast<uint64_t>(k.op));
  mix(k.flags);
  mix(static_cast<uint64_t>(k.threads));
  mix(std::bit_cast<uint32_t>(k.f0));
  mix(std::bit_cast<uint32_t>(k.f1));
  for (int64_t d : k.dims) mix(static_cast<uint64_t>(d));
  return static_cast<size_t>(h);
}

void Entry::init(const dnnl::primitive_desc_base& pd, std::span<const Arg> args) {
  HEADLAB_ASSERT(static_cast<int>(args.size()) <= kMaxArgs);
  primitive_ = dnnl::primitive(pd.get());
  int i = 0;
  for (const auto& [arg, md] : args) {
    memories_[i] = dnnl::memory(md, engine(), DNNL_MEMORY_NONE);
    args_[i] = {arg, memories_[i].get()};
    ++i;
  }
  num_data_args_ = i;
  const dnnl::memory::desc scratch = pd.scratchpad_desc();
  if (scratch.get_size() > 0) {
    memories_[i] = dnnl::memory(scratch, engine());  // owns its buffer
    args_[i] = {DNNL_ARG_SCRATCHPAD, memories_[i].get()};
    ++i;
  }
  num_args_ = i;
}

void Entry::execute(std::span<const void* const> data) {
  std::lock_guard<std::mutex> lock(mutex_);
  execute_locked(data);
}

void Entry::execute_locked(std::span<const void* const> data) {
  const ScopedThreads scoped(threads);
  HEADLAB_ASSERT(static_cast<int>(data.size()) == num_data_args_);
  int i = 0;
  for (const void* p : data) {
    // oneDNN takes non-const handles for inputs too; it does not write inputs.
    dnnl_memory_set_data_handle_v2(args_[i].memory, const_cast<void*>(p), nullptr);
    ++i;
  }
  const dnnl_status_t st =
      dnnl_primitive_execute(primitive_.get(), thread_stream(), num_args_, args_.data());
  HEADLAB_ASSERT(st == dnnl_success);
}

Entry* find_entry(const Key& key) {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  auto it = c.entries.find(key);
  return it == c.entries.end() ? nullptr : it->second.get();
}

Entry& insert_entry(const Key& key, std::unique_ptr<Entry> entry) {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  auto [it, inserted] = c.entries.try_emplace(key, std::move(entry));
  return *it->second;
}

size_t cache_size() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  return c.entries.size();
}

dnnl::memory::desc f32_desc(const dnnl::memory::dims& dims, const dnnl::memory::dims& strides) {
  if (!strides.empty()) return dnnl::memory::desc(dims, dnnl::memory::data_type::f32, strides);
  using tag = dnnl::memory::format_tag;
  HEADLAB_ASSERT(dims.size() >= 1 && dims.size() <= 3);
  const tag plain = dims.size() == 1 ? tag::a : dims.size() == 2 ? tag::ab : tag::abc;
  return dnnl::memory::desc(dims, dnnl::memory::data_type::f32, plain);
}

dnnl::primitive_attr base_attr() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

void init_matmul(Entry& entry, const dnnl::memory::desc& src, const dnnl::memory::desc& weights,
                 const dnnl::memory::desc& bias, bool with_bias, const dnnl::memory::desc& dst,
                 const dnnl::primitive_attr& attr) {
  const dnnl::matmul::desc md = with_bias ? dnnl::matmul::desc(src, weights, bias, dst)
                                          : dnnl::matmul::desc(src, weights, dst);
  const dnnl::matmul::primitive_desc pd(md, attr, engine());
  if (with_bias)
    entry.init(pd, {{DNNL_ARG_SRC, src},
                    {DNNL_ARG_WEIGHTS, weights},
                    {DNNL_ARG_BIAS, bias},
                    {DNNL_ARG_DST, dst}});
  else
    entry.init(pd, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, dst}});
}

}  // namespace headlab::onednn
