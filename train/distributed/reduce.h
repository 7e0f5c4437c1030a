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

#include <cstdint>
#include <span>
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

  // sizes: the length of each gradient buffer, in the order add() and finish() pass them.
  GradientReducer(Comm& comm, int64_t local_micro_batches, std::vector<int64_t> sizes);

  // Whether there is anything to reduce (more than one micro-batch in the step).
  bool active() const { return micro_batches_ > 1; }
  // Takes this rank's next micro-batch's gradient (n_m * g_m, see the top). grads: one span per
  // buffer, of the sizes given.
  void add(std::span<const std::span<float>> grads, int64_t tokens);
  // After every local micro-batch was added: every rank's grads = G. total_tokens: the sum of n_m
  // over the whole step (> 0). Throws headlab::Error when a peer does not answer (Comm).
  void finish(std::span<const std::span<float>> grads, int64_t total_tokens);
  // Seconds the last finish() took (the chain, the broadcast and the copies): the step's
  // "allreduce time".
  double last_seconds() const { return last_seconds_; }

 private:
  void chain();

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
};

}  // namespace headlab
