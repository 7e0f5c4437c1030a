// Compiled with -ffp-contract=off (CMakeLists.txt): `s + n * g` must stay a rounded product then
// a rounded sum, in the loop that folds micro-batches in one process and in the one that scales
// them on a rank, or the two paths would differ in the last bit where a compiler fuses an FMA.

#include "train/distributed/reduce.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "core/error.h"

namespace headlab {
namespace {

using Grads = std::span<const std::span<float>>;

// flat = n * g, buffer after buffer.
void scale_into(Grads grads, float n, float* flat) {
  for (const std::span<float> g : grads) {
    for (size_t i = 0; i < g.size(); ++i) flat[i] = n * g[i];
    flat += g.size();
  }
}

// flat = flat + n * g.
void add_scaled_into(Grads grads, float n, float* flat) {
  for (const std::span<float> g : grads) {
    for (size_t i = 0; i < g.size(); ++i) flat[i] = flat[i] + n * g[i];
    flat += g.size();
  }
}

void add_into(const float* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = dst[i] + src[i];
}

// g = flat / d.
void divide_out(const float* flat, float d, Grads grads) {
  for (const std::span<float> g : grads) {
    for (size_t i = 0; i < g.size(); ++i) g[i] = flat[i] / d;
    flat += g.size();
  }
}

void keep_until_exit(std::vector<float> buffer) {
  static std::mutex mutex;
  static std::vector<std::vector<float>> kept;
  std::lock_guard lock(mutex);
  kept.push_back(std::move(buffer));
}

void copy_out(const float* flat, Grads grads) {
  for (const std::span<float> g : grads) {
    std::copy(flat, flat + g.size(), g.begin());
    flat += g.size();
  }
}

}  // namespace

GradientReducer::GradientReducer(Comm& comm, int64_t local_micro_batches,
                                 std::vector<int64_t> sizes)
    : comm_(comm),
      local_(local_micro_batches),
      micro_batches_(local_micro_batches * comm.size()),
      sizes_(std::move(sizes)) {
  HEADLAB_ASSERT(local_ >= 1);
  for (int64_t s : sizes_) total_ += s;
  chunk_ = std::clamp((total_ + comm.size() - 1) / comm.size(), kMinChunk, kMaxChunk);
  if (!active()) return;
  sum_.resize(static_cast<size_t>(total_));
  if (comm_.rank() > 0)
    slots_.assign(static_cast<size_t>(local_), std::vector<float>(static_cast<size_t>(total_)));
  // Buckets for the overlap: whole buffers from the last one back, each at least `bucket`
  // floats (the first buffers make the last bucket, however small).
  int64_t off = 0;
  for (int64_t size : sizes_) {
    offsets_.push_back(off);
    off += size;
  }
  bucket_of_.resize(sizes_.size());
  const int64_t bucket = std::clamp(total_ / 8, kMinBucket, kMaxBucket);
  int64_t filled = 0;
  for (size_t i = sizes_.size(); i-- > 0;) {
    if (bucket_end_.size() == bucket_begin_.size()) bucket_end_.push_back(offsets_[i] + sizes_[i]);
    bucket_of_[i] = bucket_end_.size() - 1;
    filled += sizes_[i];
    if (filled >= bucket || i == 0) {
      bucket_begin_.push_back(offsets_[i]);
      filled = 0;
    }
  }
}

GradientReducer::~GradientReducer() {
  if (!thread_.joinable()) return;
  // The backward threw: the chain thread may be waiting for a peer (a receive from a rank that
  // is behind or failed too), which could last until runtime.dist_timeout. The comm ends that
  // wait at once; the step's own error is what the caller reports.
  {
    std::lock_guard lock(mutex_);
    abandon_ = true;
  }
  bucket_in_.notify_all();
  comm_.interrupt();
  thread_.join();
  // The MPI library may still write a receive's chunk that it could not cancel, or read a
  // send's (Open MPI cancels no send): the sum is kept until the process exits (after MPI's
  // end). The job is ending.
  keep_until_exit(std::move(sum_));
}

void GradientReducer::add(Grads grads, int64_t tokens) {
  HEADLAB_ASSERT(added_ < local_ && grads.size() == sizes_.size());
  for (size_t i = 0; i < sizes_.size(); ++i)
    HEADLAB_ASSERT(static_cast<int64_t>(grads[i].size()) == sizes_[i]);
  const auto n = static_cast<float>(tokens);
  if (active()) {
    if (comm_.rank() > 0)
      scale_into(grads, n, slots_[static_cast<size_t>(added_)].data());  // until S arrives
    else if (added_ == 0)
      scale_into(grads, n, sum_.data());  // S_0
    else
      add_scaled_into(grads, n, sum_.data());
  }
  ++added_;
}

bool GradientReducer::overlaps() const {
  return active() && comm_.size() > 1;
}

void GradientReducer::begin_last(int64_t tokens) {
  HEADLAB_ASSERT(overlaps() && added_ == local_ - 1 && !thread_.joinable());
  last_tokens_ = static_cast<float>(tokens);
  missing_.assign(bucket_begin_.size(), 0);
  for (size_t b : bucket_of_) ++missing_[b];
  taken_.assign(sizes_.size(), false);
  abandon_ = false;
  error_ = nullptr;
  overlapped_ = true;
  thread_ = std::thread([this] { run_buckets(); });
}

void GradientReducer::ready(size_t i, std::span<float> grad) {
  HEADLAB_ASSERT(overlapped_ && i < sizes_.size() && !taken_[i] &&
                 static_cast<int64_t>(grad.size()) == sizes_[i]);
  taken_[i] = true;
  const Grads one(&grad, 1);
  const auto at = static_cast<size_t>(offsets_[i]);
  // What add() does for this buffer: the same products and sums, into disjoint floats.
  if (comm_.rank() > 0)
    scale_into(one, last_tokens_, slots_.back().data() + at);
  else if (local_ == 1)
    scale_into(one, last_tokens_, sum_.data() + at);
  else
    add_scaled_into(one, last_tokens_, sum_.data() + at);
  bool complete = false;
  {
    std::lock_guard lock(mutex_);
    complete = --missing_[bucket_of_[i]] == 0;
  }
  if (complete) bucket_in_.notify_all();
}

void GradientReducer::end_last(Grads grads) {
  HEADLAB_ASSERT(overlapped_ && grads.size() == sizes_.size());
  for (size_t i = 0; i < sizes_.size(); ++i)
    if (!taken_[i]) ready(i, grads[i]);
  const auto start = std::chrono::steady_clock::now();
  thread_.join();
  waited_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ++added_;
  if (error_) std::rethrow_exception(error_);
}

void GradientReducer::run_buckets() {
  try {
    for (size_t b = 0; b < bucket_begin_.size(); ++b) {
      {
        std::unique_lock lock(mutex_);
        bucket_in_.wait(lock, [&] { return missing_[b] == 0 || abandon_; });
        if (abandon_) return;
      }
      chain_range(bucket_begin_[b], bucket_end_[b]);
    }
  } catch (...) {
    error_ = std::current_exception();
  }
}

// S through the ranks in rank order, one chunk at a time: rank r receives S (over the
// micro-batches of ranks 0..r-1) from r - 1, adds its own in order and passes it on.
void GradientReducer::chain() {
  chain_range(0, total_);
}

void GradientReducer::chain_range(int64_t begin, int64_t end) {
  const int r = comm_.rank(), n = comm_.size();
  for (int64_t off = begin; off < end; off += chunk_) {
    const int64_t len = std::min(chunk_, end - off);
    const std::span<float> chunk(sum_.data() + off, static_cast<size_t>(len));
    if (r > 0) {
      comm_.recv(r - 1, bytes_of(chunk));
      for (const std::vector<float>& slot : slots_) add_into(slot.data() + off, chunk.data(), len);
    }
    if (r < n - 1) comm_.send(r + 1, bytes_of(std::span<const float>(chunk)));
  }
}

void GradientReducer::finish(Grads grads, int64_t total_tokens) {
  HEADLAB_ASSERT(added_ == local_ && total_tokens > 0);
  added_ = 0;
  if (!active()) return;
  const bool overlapped = std::exchange(overlapped_, false);
  const auto start = std::chrono::steady_clock::now();
  const auto d = static_cast<float>(total_tokens);
  if (comm_.size() == 1) {
    divide_out(sum_.data(), d, grads);
  } else {
    if (!overlapped) chain();
    const int last = comm_.size() - 1;
    if (comm_.rank() == last)
      for (float& v : sum_) v = v / d;
    comm_.broadcast(last, bytes_of(std::span(sum_)));
    copy_out(sum_.data(), grads);
  }
  last_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() +
                  (overlapped ? waited_ : 0.0);
}

}  // namespace headlab
