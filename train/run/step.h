#pragma once
// TrainStep: one training step of a run's model, as `headlab train` takes it (trainer.h) and
// `headlab bench --config` times it. It owns what only training needs: the optimizer over the
// model's parameters ([optim]), the schedule ([schedule] over train.steps) and the reducer of
// gradients over micro-batches and ranks (train/distributed/reduce.h).
//
// Update s = step + 1 trains on batch step of the data stream, whose global batch is
// M = grad_accum x ranks micro-batches of batch_size sentences; rank r computes micro-batches
// m = r * grad_accum .. (r + 1) * grad_accum - 1 (docs/distributed.md):
//
//   for each of this rank's micro-batches m:
//     sentences [m B, (m + 1) B) of batch step: task.generate_sentences(seed, step, m B, B)
//     dropout masks keyed by (step, sentence, site)           core/sample_rng.h
//     loss_m = cross_entropy(model(micro-batch), labels)      mean over its labelled tokens
//     zero the gradients (but before the first), loss_m.backward()
//   gradient = the canonical reduction over all M micro-batches       train/distributed/reduce.h
//     (on several ranks the last micro-batch's gradients enter it during its backward, each
//     parameter's as soon as the tape has finished it: the reducer's overlap)
//   loss, accuracy: of the global batch (token-weighted, in micro-batch order, on every rank)
//   norm = clip_grad_norm(params, optim.clip_norm)            before clipping
//   non-finite loss or norm -> throw NonFiniteError(s)        before any update, on every rank
//   optimizer.set_lr(schedule.lr_at(s)); optimizer.step(); optimizer.zero_grad()
//     (runtime.shard_optimizer under mpirun: each rank updates the parameters it owns, then
//     every owner broadcasts their new values, optimizer_shard.h)
//
// With one micro-batch (grad_accum 1, one rank) that is the plain step: no reduction pass.
// Every rank holds the same parameters and (unsharded) optimizer state after every step; the
// weights, the optimizer state and the metrics of N ranks x A equal those of one process x N A bit for bit
// (at the same thread count per process). The data and the dropout masks are pure functions of
// (train.seed, step, sentence), so a step depends on nothing but the parameters, the optimizer
// state and `step`.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "autograd/tape.h"
#include "core/error.h"
#include "train/eval/evaluation.h"
#include "train/run/metrics.h"
#include "train/tasks/task.h"

namespace headlab {

class Comm;
class GradientReducer;
class Optimizer;
class OptimizerShard;
class RunModel;
class Schedule;

// Training stopped on a NaN or Inf loss or gradient norm (or, from the run, parameters). Thrown
// before the update, so the parameters are untouched. Derives from Error: catch it first.
class NonFiniteError : public Error {
 public:
  NonFiniteError(int64_t step, const std::string& message) : Error(message), step_(step) {}
  int64_t step() const { return step_; }

 private:
  int64_t step_;
};

class TrainStep {
 public:
  // The optimizer, the schedule and the reducer for `model` on comm's ranks (every rank builds
  // the same); every parameter's gradient is allocated, zero, once. Throws headlab::Error for
  // options the optimizer or the schedule refuse.
  TrainStep(RunModel& model, Comm& comm);
  ~TrainStep();
  TrainStep(const TrainStep&) = delete;
  TrainStep& operator=(const TrainStep&) = delete;

  // Update number step + 1 (see the top). Returns its metrics (tokens_per_second and
  // elapsed_seconds are the run's to fill). Throws NonFiniteError before the update when the
  // global batch's loss or the gradient norm is not finite, and headlab::Error when the batch
  // has no labelled token.
  StepMetrics operator()(int64_t step);

  Optimizer& optimizer() { return *optimizer_; }
  // The optimizer state's sharding over the ranks (runtime.shard_optimizer, optimizer_shard.h).
  OptimizerShard& shard() { return *shard_; }
  // train --dry-run's trial: one forward and backward of the model on the first `sentences`
  // sentences of update 1 (the real shapes: every feature, the task's sequence length), then
  // the gradients zeroed again. Nothing else changes (parameters, optimizer, step). A layer
  // that fails or breaks a slot's contract throws here, naming itself (LayerError,
  // layers/encoder_layer.h).
  void trial(int64_t sentences);
  // Seconds the last step spent reducing gradients over its micro-batches and ranks.
  double last_reduce_seconds() const;

 private:
  // Micro-batch `a` of this rank at `step`: its sentences and dropout positions, the forward and
  // the loss, its tokens counted into counts_[a].
  Var micro_batch_loss(int64_t step, int64_t a);
  // The model's logits and loss on n sentences of update `step` from global position `first`
  // (into batch_), dropout keyed by the same positions.
  struct SentencesLoss {
    Var logits, loss;
  };
  SentencesLoss loss_of_sentences(int64_t step, int64_t first, int64_t n);
  // The global batch's counts (no relations) from every rank's micro-batches, for update s.
  EvalCounts global_counts(int64_t s);
  // The parameters' gradient buffers, in the optimizer's order (into gradients_).
  std::span<const std::span<float>> gradients();

  RunModel& model_;
  Comm& comm_;
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<OptimizerShard> shard_;
  std::unique_ptr<Schedule> schedule_;
  std::unique_ptr<GradientReducer> reducer_;
  Batch batch_;
  std::vector<std::span<const int32_t>> features_;  // views of batch_'s features
  std::vector<EvalCounts> counts_;                  // [grad_accum] this step's micro-batches
  // One micro-batch's share of the step's metrics (plain data: ranks exchange it as bytes);
  // this rank's, then every rank's (global_counts).
  struct MicroStats {
    double loss_sum = 0;  // its mean cross-entropy times its tokens
    int64_t tokens = 0;
    int64_t correct = 0;
  };
  std::vector<MicroStats> micro_, micro_all_;
  std::vector<std::span<float>> gradients_;
  // The overlap's hook: a parameter's node -> its index among the optimizer's parameters.
  std::unordered_map<const void*, size_t> parameter_index_;
  LeafDone leaf_done_;
};

}  // namespace headlab
