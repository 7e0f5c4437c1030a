#pragma once
// Trainer: the training loop of `headlab train`, as library code (it never prints and never
// exits; the CLI watches it through a TrainObserver).
//
// From a validated Config it sets runtime.threads and runtime.backend, builds the task
// (train/task.h), the Encoder (layers/encoder.h), the optimizer and the schedule (optim/). One
// step s = 1..train.steps is:
//
//   batch = task.generate(train.seed, s - 1, batch_size)      the data cursor is s - 1
//   logits = model(batch) (train mode)                        [B, T, C]
//   loss = cross_entropy(logits, labels, ignore BOS)          mean over non-BOS tokens
//   loss.backward()
//   norm = clip_grad_norm(params, optim.clip_norm)            before clipping
//   non-finite loss or norm -> throw NonFiniteError(s)        before any update
//   optimizer.set_lr(schedule.lr_at(s)); optimizer.step(); optimizer.zero_grad()
//
// Every log_every steps (and the last) a metrics row, every eval_every steps (and the last) an
// evaluation (NoGradGuard, eval mode, eval_batches x eval_batch_size sentences from eval_seed,
// the same sentences every time), every checkpoint_every steps (and the last) a checkpoint
// (train/checkpoint.h). All state a step depends on (parameters, optimizer moments and step,
// the dropout generator, the data cursor) is in the checkpoint, so resume() continues
// bit-identically on the same machine, backend and thread count.
//
// Files in the run directory: config.resolved.toml, metrics.jsonl (train/metrics.h),
// timeline.jsonl (with train.timeline: head masses at every evaluation, train/run/timeline.h),
// checkpoints/, and summary.json when run() finishes.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/error.h"
#include "train/config/config.h"
#include "train/run/metrics.h"

namespace headlab {

class Encoder;
class Optimizer;
class Task;
class Schedule;
class MetricsWriter;
class TimelineWriter;
class HeadMetricsAccumulator;
struct Batch;

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
  // Asked after every step: true stops the run there (Ctrl-C in the CLI). The trainer then
  // saves a checkpoint of that step, so --resume continues exactly, and returns with
  // TrainResult::interrupted set (no final evaluation, no summary.json).
  virtual bool should_stop() { return false; }
};

class Trainer {
 public:
  // Builds everything from `config` (which load_config already validated): sets the thread count
  // and the backend, then the task, model (initialised from train.seed), optimizer and
  // schedule. Writes nothing. Throws headlab::Error for what only the layers can check (a layer
  // option table's unknown key, ...).
  Trainer(Config config, std::filesystem::path run_dir);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // Loads <run_dir>/checkpoints/latest: model, optimizer state, step, dropout generator and
  // data cursor. Throws headlab::Error when there is no checkpoint, when its config differs from
  // this one in a key that changes shapes (listing them), or when its tensors do not fit.
  void resume();

  // Trains from the current step to train.steps, writing the run files (see the top). Returns
  // the final evaluation and timings; also writes summary.json. Stops early, after saving a
  // checkpoint, when the observer's should_stop() says so. Throws NonFiniteError on a
  // non-finite loss or gradient norm, headlab::Error on an I/O failure.
  TrainResult run(TrainObserver* observer = nullptr);

  // One evaluation pass (see the top) at the current parameters; leaves the model in train mode
  // and changes no training state.
  EvalMetrics evaluate();

  const Config& config() const { return config_; }
  const std::filesystem::path& run_dir() const { return run_dir_; }
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
  void after_step(StepMetrics& m, Session& session, MetricsWriter& metrics, TrainObserver& obs,
                  TrainResult& result);
  void checkpoint(const Session& session, TrainObserver& obs);
  // evaluate(), also measuring every head's attention on the evaluation sentences into `heads`
  // (when not null).
  EvalMetrics evaluate(HeadMetricsAccumulator* heads);
  // The periodic evaluation: evaluate() and, with train.timeline, its timeline.jsonl row.
  EvalMetrics evaluate_and_record();
  void save(double elapsed, double train_seconds);

  Config config_;
  std::filesystem::path run_dir_;
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
};

}  // namespace headlab
