#pragma once
// Trainer: the run of `headlab train`, as library code (it never prints and never exits; the CLI
// watches it through a TrainObserver). The model is a RunModel (model.h), each update a
// TrainStep (step.h), each evaluation evaluate() (evaluate.h); the Trainer keeps the cadence,
// the files and the stops:
//
//   for s = step + 1 .. train.steps:
//     metrics = train_step(s - 1)
//     every log_every steps (and the last): a metrics row           metrics.jsonl
//     every eval_every steps (and the last): an evaluation          (+ timeline.jsonl)
//     every checkpoint_every steps (and the last): a checkpoint     checkpoints/ (checkpoint.h)
//     observer.should_stop(): a checkpoint of this step, then return (interrupted)
//   summary.json
//
// All state a step depends on (parameters, optimizer moments and step, the data cursor) is in
// the checkpoint, and the data and the dropout masks are pure functions of (train.seed, step,
// sentence), so resume() continues bit-identically on the same machine, backend and thread
// count.
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

#include "core/state_dict.h"
#include "train/config/config.h"
#include "train/run/metrics.h"
#include "train/run/model.h"
#include "train/run/step.h"

namespace headlab {

class Comm;
class MetricsWriter;
class TimelineWriter;
class HeadMetricsAccumulator;
struct CheckpointData;

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
  // Builds the run's model and its training step from `config` (which load_config already
  // validated; see RunModel and TrainStep). Writes nothing. comm: the ranks of a data-parallel
  // job (train/distributed/comm.h), every one of which builds the same Trainer; null trains alone.
  Trainer(Config config, std::filesystem::path run_dir, Comm* comm = nullptr);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // Loads a checkpoint of the run: <run_dir>/checkpoints/latest, or `checkpoint` (a directory
  // from find_checkpoint, train/run/checkpoint.h): model (RunModel::restore's checks), optimizer
  // state, step and data cursor (rank 0 reads it and sends it to the others). Throws
  // headlab::Error when there is no checkpoint, when it is damaged (checkpoint.h) or not this
  // run's (RunModel::restore), or when its optimizer state does not fit; with several ranks,
  // every rank throws it (CollectiveError).
  void resume(ConfigUse use = ConfigUse::resume, const std::filesystem::path& checkpoint = {});
  // The same from a checkpoint already loaded (load_checkpoint or load_checkpoint_dir), in this
  // process alone.
  void restore(ConfigUse use, const CheckpointData& checkpoint);

  // Trains from the current step to train.steps, writing the run files (see the top). Returns
  // the final evaluation and timings; also writes summary.json. Stops early, after saving a
  // checkpoint, when the observer's should_stop() says so. Throws NonFiniteError on a
  // non-finite loss, gradient norm or update, headlab::Error on an I/O failure.
  TrainResult run(TrainObserver* observer = nullptr);

  // One evaluation (evaluate.h) at the current parameters, on every rank together.
  EvalMetrics evaluate();

  const Config& config() const { return model_.config(); }
  const std::filesystem::path& run_dir() const { return run_dir_; }
  int64_t step() const { return step_; }
  int64_t parameter_count() const { return model_.parameter_count(); }
  // The trained model and its task, for analysis after run() (the CLI's head-analysis seam).
  Encoder& model() { return model_.encoder(); }
  const Task& task() const { return model_.task(); }
  Optimizer& optimizer() { return train_step_.optimizer(); }
  // train --dry-run: one forward and backward on a sentence or two (TrainStep::trial).
  void trial_step(int64_t sentences = 2) { train_step_.trial(sentences); }

 private:
  struct Session;  // timing of one run() call

  // The step's NonFiniteError again, saying what happened to the checkpoints.
  [[noreturn]] void stopped(const NonFiniteError& e) const;
  // metrics: null on the ranks that write no files.
  void after_step(StepMetrics& m, Session& session, MetricsWriter* metrics, TrainObserver& obs,
                  TrainResult& result);
  void checkpoint(const Session& session, TrainObserver& obs);
  // The periodic evaluation: evaluate() and, with train.timeline, its timeline.jsonl row.
  EvalMetrics evaluate_and_record();
  void save(double elapsed, double train_seconds);
  // The other ranks' part of resume(): rank 0's loaded state, by message.
  void share_resumed_state();
  // The NonFiniteError's message when a parameter or optimizer value is NaN or Inf (before a
  // save), else "".
  std::string non_finite_state(const StateDict& model, const StateDict& optimizer) const;
  const std::string& run_id();

  std::filesystem::path run_dir_;
  std::unique_ptr<Comm> own_comm_;  // a LocalComm when none was given
  Comm* comm_;
  RunModel model_;
  TrainStep train_step_;
  std::unique_ptr<TimelineWriter> timeline_;  // open during run() with train.timeline
  int64_t step_ = 0;
  int64_t last_checkpoint_ = -1;  // step of the newest checkpoint on disk, -1 if none
  double resumed_elapsed_ = 0;    // wall and step time of earlier sessions (from checkpoint)
  double resumed_train_seconds_ = 0;
  std::optional<std::string> run_id_;  // the run directory's marker id, read once
};

}  // namespace headlab
