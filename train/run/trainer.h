#pragma once
// Trainer: the training loop of `headlab train`, as library code (it never prints and never
// exits; the CLI watches it through a TrainObserver).
//
// From a validated Config it sets runtime.threads and runtime.backend, builds the task
// (train/tasks/task.h), the Encoder (layers/encoder.h), the optimizer and the schedule (optim/).
// Step s = 1..train.steps trains on batch s - 1 of the data stream (the data cursor is s - 1),
// whose global batch is M = grad_accum x ranks micro-batches of batch_size sentences; rank r
// computes micro-batches m = r * grad_accum .. (r + 1) * grad_accum - 1 (docs/distributed.md):
//
//   for each of this rank's micro-batches m:
//     sentences [m B, (m + 1) B) of batch s - 1: task.generate_sentences(seed, s - 1, m B, B)
//     dropout masks keyed by (s - 1, sentence, site)        core/sample_rng.h
//     logits = model(micro-batch) (train mode)              [B, T, C]
//     loss_m = cross_entropy(logits, labels, ignore BOS)    mean over its non-BOS tokens
//     zero the gradients (but before the first), loss_m.backward()
//   gradient = the canonical reduction over all M micro-batches    train/dist/reduce.h
//   loss, accuracy: of the global batch (token-weighted, summed in micro-batch order)
//   norm = clip_grad_norm(params, optim.clip_norm)          before clipping
//   non-finite loss or norm -> throw NonFiniteError(s)      before any update, on every rank
//   optimizer.set_lr(schedule.lr_at(s)); optimizer.step(); optimizer.zero_grad()
//
// With one micro-batch (grad_accum 1, one rank) that is the plain step: no reduction pass.
// Every rank holds the same parameters and optimizer state after every step; the weights, the
// optimizer state and the metrics of N ranks x A equal those of one process x N A bit for bit
// (at the same thread count per process).
//
// Every log_every steps (and the last) a metrics row, every eval_every steps (and the last) an
// evaluation (NoGradGuard, eval mode, eval_batches x eval_batch_size sentences from eval_seed,
// the same sentences every time), every checkpoint_every steps (and the last) a checkpoint
// (train/run/checkpoint.h). Evaluation batches are split over the ranks (the timeline's weighed
// batches on rank 0, the others round robin) and their counts summed in batch order. All state a step depends on (parameters, optimizer
// moments and step, the data cursor) is in the checkpoint, and the data and the dropout masks
// are pure functions of (train.seed, step, sentence), so resume() continues bit-identically on
// the same machine, backend and thread count.
//
// Files in the run directory: config.resolved.toml, metrics.jsonl (train/run/metrics.h),
// timeline.jsonl (with train.timeline: head masses at every evaluation, train/run/timeline.h),
// checkpoints/ (train/run/checkpoint.h), and summary.json when run() finishes. Only rank 0
// reads or writes the run directory; the other ranks get a resumed checkpoint from rank 0 by
// message. The trainer does not claim the directory: its caller does, once, on rank 0
// (claim_run_dir, train/run/run_dir.h); the CLI also writes train.log and run.json
// (train/run/run_json.h) there.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/state_dict.h"
#include "train/config/config.h"
#include "train/run/metrics.h"

namespace headlab {

class Comm;
class Encoder;
class GradientReducer;
class Optimizer;
class Task;
class Schedule;
class MetricsWriter;
class TimelineWriter;
class HeadMetricsAccumulator;
struct Batch;
struct CheckpointData;

// Training stopped on a NaN or Inf loss or gradient norm. Thrown before the update, so the
// parameters and the last checkpoint are untouched. Derives from Error: catch it first.
class NonFiniteError : public Error {
 public:
  NonFiniteError(int64_t step, const std::string& message) : Error(message), step_(step) {}
  int64_t step() const { return step_; }

 private:
  int64_t step_;
};

// Receives progress from Trainer::run(); every method has an empty default. Called on the
// training thread; keep them cheap (on_step runs every step).
class TrainObserver {
 public:
  virtual ~TrainObserver() = default;
  virtual void on_start(int64_t /*start_step*/, int64_t /*total_steps*/, int64_t /*parameters*/) {}
  virtual void on_step(const StepMetrics&) {}
  virtual void on_log(const StepMetrics&) {}
  virtual void on_eval(const EvalMetrics&) {}
  virtual void on_checkpoint(int64_t /*step*/, const std::filesystem::path& /*dir*/) {}
  // Asked after every step: true stops the run there (SIGINT, SIGTERM, SIGHUP in the CLI). It then
  // saves a checkpoint of that step, so --resume continues exactly, and returns with
  // TrainResult::interrupted set (no final evaluation, no summary.json).
  virtual bool should_stop() { return false; }
};

class Trainer {
 public:
  // Builds everything from `config` (which load_config already validated): sets the thread count
  // and the backend, then the task, model (initialised from train.seed), optimizer and
  // schedule. Writes nothing. Throws headlab::Error for what only the layers can check (a layer
  // option table's unknown key, ...). comm: the ranks of a data-parallel job
  // (train/dist/comm.h), every one of which builds the same Trainer; null trains alone.
  Trainer(Config config, std::filesystem::path run_dir, Comm* comm = nullptr);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // Loads a checkpoint of the run: <run_dir>/checkpoints/latest, or `checkpoint` (a directory
  // from find_checkpoint, train/run/checkpoint.h): model, optimizer state, step and data cursor
  // (rank 0 reads it and sends it to the others). Throws headlab::Error when there is no
  // checkpoint, when it is damaged (checkpoint.h), when it was written by another run directory
  // (its run id), when its global batch (batch_size x grad_accum x ranks) differs from this
  // run's (naming both), when this config is another run than the checkpoint's
  // (identity_differences for `use`, listing every key with both values), or when its tensors
  // do not fit; with several ranks, every rank throws it (CollectiveError).
  void resume(ConfigUse use = ConfigUse::resume, const std::filesystem::path& checkpoint = {});
  // The same from a checkpoint already loaded (load_checkpoint or load_checkpoint_dir), in this
  // process alone.
  void restore(ConfigUse use, CheckpointData checkpoint);

  // Trains from the current step to train.steps, writing the run files (see the top). Returns
  // the final evaluation and timings; also writes summary.json. Stops early, after saving a
  // checkpoint, when the observer's should_stop() says so. Throws NonFiniteError on a
  // non-finite loss or gradient norm, headlab::Error on an I/O failure.
  TrainResult run(TrainObserver* observer = nullptr);

  // One evaluation pass (see the top) at the current parameters, on every rank together;
  // leaves the model in train mode and changes no training state.
  EvalMetrics evaluate() { return evaluate(nullptr); }
  // Seconds the last step spent reducing gradients over its micro-batches and ranks.
  double last_reduce_seconds() const;

  // One training step as run() takes it (batch, forward, loss, backward, clipping, update)
  // without metrics rows, evaluations or checkpoints: what `headlab bench --config` times.
  StepMetrics step_once() { return train_step(); }

  const Config& config() const { return config_; }
  const std::filesystem::path& run_dir() const { return run_dir_; }
  Comm& comm() { return *comm_; }
  int64_t step() const { return step_; }
  int64_t parameter_count() const;
  // The trained model and its task, for analysis after run() (the CLI's head-analysis seam).
  Encoder& model() { return *model_; }
  const Task& task() const { return *task_; }
  Optimizer& optimizer() { return *optimizer_; }

 private:
  struct Session;  // timing of one run() call

  // One update; returns the metrics of the step (tokens_per_second, elapsed filled by run()).
  StepMetrics train_step();
  // The parameters' gradient buffers, in the optimizer's order.
  std::vector<std::span<float>> gradients();
  // metrics: null on the ranks that write no files.
  void after_step(StepMetrics& m, Session& session, MetricsWriter* metrics, TrainObserver& obs,
                  TrainResult& result);
  void checkpoint(const Session& session, TrainObserver& obs);
  // evaluate(), also measuring every head's attention on the evaluation sentences into `heads`
  // (when not null).
  EvalMetrics evaluate(HeadMetricsAccumulator* heads);
  // The periodic evaluation: evaluate() and, with train.timeline, its timeline.jsonl row.
  EvalMetrics evaluate_and_record();
  void save(double elapsed, double train_seconds);
  // The other ranks' part of resume(): rank 0's loaded state, by message.
  void share_resumed_state();
  // Throws NonFiniteError when a parameter or optimizer value is NaN or Inf (before a save).
  void check_finite_state(const StateDict& model, const StateDict& optimizer) const;
  const std::string& run_id();

  Config config_;
  std::filesystem::path run_dir_;
  std::unique_ptr<Comm> own_comm_;  // a LocalComm when none was given
  Comm* comm_;
  std::unique_ptr<GradientReducer> reducer_;
  std::unique_ptr<Task> task_;
  std::unique_ptr<Encoder> model_;
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<Schedule> schedule_;
  std::unique_ptr<Batch> batch_;
  std::unique_ptr<TimelineWriter> timeline_;     // open during run() with train.timeline
  std::vector<std::span<const int32_t>> spans_;  // views of batch_'s features
  int64_t step_ = 0;
  int64_t last_checkpoint_ = -1;  // step of the newest checkpoint on disk, -1 if none
  double resumed_elapsed_ = 0;    // wall and step time of earlier sessions (from checkpoint)
  double resumed_train_seconds_ = 0;
  std::optional<std::string> run_id_;  // the run directory's marker id, read once
};

}  // namespace headlab
