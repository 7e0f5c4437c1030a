#pragma once
// The canonical reduction of one optimizer step's gradients over its micro-batches, the same
// numbers whether the micro-batches run in one process (train.grad_accum) or on several ranks
// (docs/distributed.md, "Reduction order").
//
// A step's global batch is M = grad_accum x ranks micro-batches, numbered m = 0..M-1 in the
// order of the global batch (rank r computes m = r * grad_accum .. (r + 1) * grad_accum - 1).
// With g_m the gradient of micro-batch m computed alone (its parameters' gradients zeroed
// before its backward) and n_m its number of counted tokens, the step's gradient is
//
//   S_0 = n_0 * g_0,   S_m = S_{m-1} + n_m * g_m  (m = 1..M-1),   G = S_{M-1} / (sum_m n_m)
//
// element by element in fp32, each product rounded before its sum: the mean over every token
// of the global batch. One process folds its micro-batches in this order as they come; on
// several ranks the running sum S travels through the ranks in rank order (a chain, cut into
// about one chunk per rank so that the ranks work on different chunks at once, as in a ring
// allreduce), each rank adding its own micro-batches in order, and the last rank's G is
// broadcast (a copy, no arithmetic). Each
// element sees the same operations in the same order either way, so G is bit-identical for any
// split of the same M micro-batches. With M = 1, G = g_0 untouched (no pass at all).
//
//   GradientReducer reduce(comm, grad_accum, sizes);  // sizes: each gradient buffer's length
//   for (int64_t a = 0; a < grad_accum; ++a) {
//     ... zero the gradients, forward and backward micro-batch a of this rank ...
//     reduce.add(grads, tokens_a);                    // grads: the gradient buffers, in order
//   }
//   reduce.finish(grads, tokens_of_the_whole_step);   // every rank: grads = G
//
// Overlap (when overlaps()): the last local micro-batch is not add()ed after its backward but
// fed to the chain during it, buffer by buffer as each gradient becomes final (the tape's
// LeafDone hook, autograd/var.h), so that the chain runs while the rest of the backward does:
//
//   reduce.begin_last(tokens_last);                   // before the last backward
//   ... backward, calling reduce.ready(i, grads[i]) when buffer i's gradient is final ...
//   reduce.end_last(grads);                           // after it: the buffers not yet named
//   reduce.finish(grads, tokens_of_the_whole_step);
//
// The buffers go in buckets, in reverse order (the order in which a backward finishes them);
// a thread of the reducer passes each bucket through the chain as soon as all its buffers are
// in, in bucket order on every rank (the chain's messages pair up by order). Each element still
// sees the same operations in the same order, so G is the same bits with or without overlap.
// While that thread runs (between begin_last and end_last) the comm is used by it alone: the
// caller makes no comm call of its own there.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "train/distributed/comm.h"

namespace headlab {

class GradientReducer {
 public:
  // Floats per chunk of the chain: the gradient's length / ranks, within these bounds (16 KiB
  // to 16 MiB): few messages (each one a handshake between two ranks), yet enough for the ranks
  // of a long chain to work at once.
  static constexpr int64_t kMinChunk = int64_t{1} << 12;
  static constexpr int64_t kMaxChunk = int64_t{1} << 22;

  // Floats per bucket of the overlapped chain (at least; whole buffers): an eighth of the
  // gradient, within 4 KiB and 4 MiB, so the first bucket is in early in the backward while a
  // message still costs more than its handshake.
  static constexpr int64_t kMinBucket = int64_t{1} << 10;
  static constexpr int64_t kMaxBucket = int64_t{1} << 20;

  // sizes: the length of each gradient buffer, in the order add() and finish() pass them.
  GradientReducer(Comm& comm, int64_t local_micro_batches, std::vector<int64_t> sizes);
  // A chain thread still running (a backward that threw between begin_last and end_last) is
  // stopped: its wait for a peer is interrupted (Comm::interrupt), so the destructor returns at
  // once and the comm is unusable afterwards (the job ends with the backward's error).
  ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  // Whether there is anything to reduce (more than one micro-batch in the step).
  bool active() const { return micro_batches_ > 1; }
  // Takes this rank's next micro-batch's gradient (n_m * g_m, see the top). grads: one span per
  // buffer, of the sizes given.
  void add(std::span<const std::span<float>> grads, int64_t tokens);
  // Whether the last local micro-batch is overlapped with the chain (several ranks and more than
  // one micro-batch): then it goes through begin_last, ready and end_last instead of add.
  bool overlaps() const;
  // Before the last local micro-batch's backward: its tokens; starts the chain thread.
  void begin_last(int64_t tokens);
  // Buffer i's gradient of the last micro-batch is final (grad: its span, of sizes[i]); takes
  // it in and lets the chain start on every bucket now complete. Each buffer at most once.
  void ready(size_t i, std::span<float> grad);
  // After that backward: takes the buffers ready() did not name, waits for the chain and
  // rethrows what it threw (a peer that does not answer).
  void end_last(std::span<const std::span<float>> grads);
  // After every local micro-batch was added: every rank's grads = G. total_tokens: the sum of n_m
  // over the whole step (> 0). Throws headlab::Error when a peer does not answer (Comm).
  void finish(std::span<const std::span<float>> grads, int64_t total_tokens);
  // Seconds the last finish() took (the chain, the broadcast and the copies); with the overlap,
  // plus end_last's wait for the chain, so the chain's part that ran during the backward is not
  // counted: the step's "allreduce time", the part the step waits for.
  double last_seconds() const { return last_seconds_; }

 private:
  void chain();
  // The chain over floats [begin, end) of the flat gradient, in chunks of chunk_.
  void chain_range(int64_t begin, int64_t end);
  void run_buckets();  // the chain thread

  Comm& comm_;
  int64_t local_;          // micro-batches per rank (grad_accum)
  int64_t micro_batches_;  // M = local_ x ranks
  std::vector<int64_t> sizes_;
  int64_t total_ = 0;                      // floats over all buffers
  int64_t chunk_ = kMaxChunk;              // floats per chunk of the chain
  int64_t added_ = 0;                      // micro-batches added since the last finish
  std::vector<float> sum_;                 // S, then G
  std::vector<std::vector<float>> slots_;  // ranks > 0: n_m * g_m until S arrives
  double last_seconds_ = 0;

  // Overlap: bucket b covers floats [bucket_begin_[b], bucket_end_[b]) of the flat gradient,
  // whole buffers; bucket 0 holds the last buffers. offsets_[i]: buffer i's first float.
  std::vector<int64_t> offsets_;
  std::vector<size_t> bucket_of_;      // buffer -> bucket
  std::vector<int64_t> bucket_begin_;  // flat range of each bucket
  std::vector<int64_t> bucket_end_;
  std::vector<size_t> missing_;  // buffers of each bucket not yet ready (guarded by mutex_)
  std::vector<bool> taken_;      // buffers ready() took in this step
  std::mutex mutex_;
  std::condition_variable bucket_in_;
  bool abandon_ = false;     // guarded by mutex_: the chain thread stops at the next bucket
  bool overlapped_ = false;  // this step's last micro-batch went through begin_last
  float last_tokens_ = 0;    // its n_m
  std::exception_ptr error_;
  std::thread thread_;
  double waited_ = 0;  // seconds end_last waited for the chain thread
};

}  // namespace headlab
