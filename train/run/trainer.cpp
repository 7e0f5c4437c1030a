#include "train/run/trainer.h"

#include <chrono>
#include <cmath>
#include <optional>

#include "layers/encoder.h"
#include "optim/optimizer.h"
#include "train/analysis/head_metrics.h"
#include "train/analysis/induction.h"
#include "train/distributed/agree.h"
#include "train/distributed/comm.h"
#include "train/distributed/share.h"
#include "train/io/files.h"
#include "train/report/report.h"
#include "train/run/checkpoint.h"
#include "train/run/evaluate.h"
#include "train/run/metrics.h"
#include "train/run/optimizer_shard.h"
#include "train/run/run_dir.h"
#include "train/run/timeline.h"

namespace headlab {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// What a stop on a non-finite value left on disk.
std::string checkpoint_kept(int64_t last_checkpoint) {
  return last_checkpoint >= 0
             ? fmt::format("the last checkpoint (step {}) is untouched", last_checkpoint)
             : std::string("no checkpoint was written");
}

// summary.json's "optimizer_state": whether it is sharded (runtime.shard_optimizer), the bytes
// of optimizer state each rank's optimizer holds (asked of every rank: collective) and what each
// would hold unsharded.
nlohmann::json optimizer_state_json(Comm& comm, const OptimizerShard& shard,
                                    const Optimizer& optimizer) {
  const int64_t mine = optimizer.state_bytes();
  std::vector<int64_t> held(static_cast<size_t>(comm.size()));
  comm.allgather(bytes_of(std::span(&mine, 1)), bytes_of(std::span(held)));
  int64_t whole = 0;
  for (const auto& p : optimizer.parameters()) whole += p.var.numel();
  whole *= static_cast<int64_t>(optimizer.state_names().size() * sizeof(float));
  return {{"sharded", shard.active()}, {"bytes_per_rank", held}, {"bytes_unsharded", whole}};
}

}  // namespace

Trainer::Trainer(Config config, std::filesystem::path run_dir, Comm* comm)
    : run_dir_(std::move(run_dir)),
      own_comm_(comm ? nullptr : std::make_unique<LocalComm>()),
      comm_(comm ? comm : own_comm_.get()),
      model_(std::move(config)),
      train_step_(model_, *comm_) {}

Trainer::~Trainer() = default;

const std::string& Trainer::run_id() {
  if (!run_id_) run_id_ = has_run_marker(run_dir_) ? read_run_marker(run_dir_) : std::string();
  return *run_id_;
}

void Trainer::resume(ConfigUse use, const std::filesystem::path& checkpoint) {
  on_root(*comm_, [&] {
    if (checkpoint.empty() && !latest_checkpoint(run_dir_))
      fail("no checkpoint in '{}' ('{}' does not exist){}", run_dir_.string(),
           (run_dir_ / "checkpoints" / "latest").string(),
           use == ConfigUse::resume ? ": the run stopped before its first checkpoint; start it "
                                      "again with --overwrite"
                                    : "");
    restore(use, checkpoint.empty() ? load_checkpoint(run_dir_) : load_checkpoint_dir(checkpoint));
  });
  share_resumed_state();
}

void Trainer::restore(ConfigUse use, const CheckpointData& c) {
  model_.restore(c, use, run_dir_, comm_->size());
  const char* verb = use == ConfigUse::resume ? "resume from" : "evaluate";
  Optimizer& optimizer = train_step_.optimizer();
  // Sharded, rank 0 takes the whole state in, then hands each rank its part (scatter_state).
  if (train_step_.shard().active())
    optimizer.set_owned(std::vector<bool>(optimizer.parameters().size(), true));
  try {
    optimizer.load_state_dict(c.optimizer);
  } catch (const Error& e) {
    fail("cannot {} '{}': {}", verb, c.dir.string(), e.what());
  }
  if (optimizer.step_count() != c.step)
    fail("cannot {} '{}': optimizer.safetensors is at step {} but state.json at {}", verb,
         c.dir.string(), optimizer.step_count(), c.step);
  step_ = c.step;
  last_checkpoint_ = c.step;
  resumed_elapsed_ = c.extra.value("elapsed_seconds", 0.0);
  resumed_train_seconds_ = c.extra.value("train_seconds", 0.0);
}

void Trainer::share_resumed_state() {
  if (comm_->size() == 1) return;
  StateDict model = comm_->is_root() ? this->model().state_dict() : StateDict{};
  const bool sharded = train_step_.shard().active();
  StateDict optimizer = comm_->is_root() && !sharded ? this->optimizer().state_dict() : StateDict{};
  broadcast_state_dict(*comm_, 0, model);
  if (sharded)
    train_step_.shard().scatter_state();  // each rank its own parameters' state alone
  else
    broadcast_state_dict(*comm_, 0, optimizer);
  int64_t steps[2] = {step_, last_checkpoint_};
  double seconds[2] = {resumed_elapsed_, resumed_train_seconds_};
  broadcast_values(*comm_, 0, std::span<int64_t>(steps));
  broadcast_values(*comm_, 0, std::span<double>(seconds));
  if (comm_->is_root()) return;
  this->model().load_state_dict(model);
  if (!sharded) this->optimizer().load_state_dict(optimizer);
  step_ = steps[0];
  last_checkpoint_ = steps[1];
  resumed_elapsed_ = seconds[0];
  resumed_train_seconds_ = seconds[1];
}

void Trainer::stopped(const NonFiniteError& e) const {
  throw NonFiniteError(e.step(), fmt::format("{}; {} (try a lower optim.lr)", e.what(),
                                             checkpoint_kept(last_checkpoint_)));
}

std::string Trainer::non_finite_state(const StateDict& model, const StateDict& optimizer) const {
  for (const StateDict* dict : {&model, &optimizer})
    for (const NamedTensor& t : *dict) {
      const float* x = t.tensor.data();
      for (int64_t i = 0; i < t.tensor.numel(); ++i) {
        if (std::isfinite(x[i])) continue;
        return fmt::format(
            "training stopped at step {}: the update made {} '{}' {}; {} (try a lower optim.lr "
            "or a larger optim.eps)",
            step_, dict == &model ? "the parameter" : "the optimizer state", t.name,
            std::isnan(x[i]) ? "NaN" : "infinite", checkpoint_kept(last_checkpoint_));
      }
    }
  return {};
}

void Trainer::save(double elapsed, double train_seconds) {
  CheckpointData c;
  c.model = model().state_dict();
  c.optimizer = train_step_.shard().gather_state();  // sharded: the whole state on rank 0 alone
  // Every rank alike: they hold the same state, or (sharded) hear rank 0's verdict on the whole.
  std::string problem = comm_->is_root() || !train_step_.shard().active()
                            ? non_finite_state(c.model, c.optimizer)
                            : std::string();
  if (train_step_.shard().active()) problem = broadcast_string(*comm_, 0, problem);
  if (!problem.empty()) throw NonFiniteError(step_, problem);
  last_checkpoint_ = step_;
  if (!comm_->is_root()) return;  // rank 0 alone writes the run directory
  c.step = step_;
  c.run_id = run_id();
  c.data_cursor = step_;
  c.extra = {{"elapsed_seconds", elapsed},
             {"train_seconds", train_seconds},
             {"world_size", comm_->size()}};
  c.resolved_config = to_toml(config());
  c.config_hash = config_hash(config());
  save_checkpoint(run_dir_, c, config().train.keep_checkpoints);
}

// The bookkeeping of one session of run(): wall and step time (earlier sessions included) and
// the tokens since the last metrics row.
struct Trainer::Session {
  Clock::time_point start = Clock::now();
  double resumed_elapsed = 0;
  double train_seconds = 0;
  double interval_seconds = 0;
  int64_t interval_tokens = 0;
  double eval_seconds = 0;  // in the periodic evaluations (timeline rows included), this session

  double elapsed() const { return resumed_elapsed + seconds_since(start); }
};

TrainResult Trainer::run(TrainObserver* observer) {
  TrainObserver none;
  TrainObserver& obs = observer ? *observer : none;
  const TrainConfig& t = config().train;
  Session session{.resumed_elapsed = resumed_elapsed_, .train_seconds = resumed_train_seconds_};

  // Rank 0 alone writes the run directory (the others' metrics are the same numbers).
  std::optional<MetricsWriter> metrics;
  if (comm_->is_root()) {
    make_directories(run_dir_);
    write_file_atomic(run_dir_ / "config.resolved.toml", to_toml(config()));
    metrics.emplace(run_dir_ / "metrics.jsonl", step_ > 0 ? step_ : -1);
    if (t.timeline)
      timeline_ =
          std::make_unique<TimelineWriter>(run_dir_ / "timeline.jsonl", step_ > 0 ? step_ : -1);
  }

  TrainResult result;
  result.run_dir = run_dir_;
  result.start_step = step_;
  obs.on_start(step_, t.steps, parameter_count());
  while (step_ < t.steps) {
    const Clock::time_point t0 = Clock::now();
    StepMetrics m;
    try {
      m = train_step_(step_);
    } catch (const NonFiniteError& e) {
      stopped(e);
    }
    step_ = m.step;
    const double dt = seconds_since(t0);
    session.train_seconds += dt;
    session.interval_seconds += dt;
    session.interval_tokens += t.batch_size * t.grad_accum * comm_->size() * task().seq_len();
    m.elapsed_seconds = session.elapsed();
    result.final_loss = m.loss;
    after_step(m, session, metrics ? &*metrics : nullptr, obs, result);
    if (step_ < t.steps && any_rank(*comm_, obs.should_stop())) {
      if (last_checkpoint_ != step_) checkpoint(session, obs);
      result.interrupted = true;
      result.steps = step_;
      result.train_seconds = session.train_seconds;
      result.wall_seconds = session.elapsed();
      result.eval_seconds = session.eval_seconds;
      timeline_.reset();
      return result;
    }
  }
  if (result.start_step == t.steps) {  // resumed a finished run: evaluate again, rewrite summary
    result.final_eval = evaluate();
    result.final_eval.elapsed_seconds = session.elapsed();
  }
  timeline_.reset();
  // An exploded model (finite weights near 1e30 after one step at a huge lr) ends like a NaN
  // loss: exit 3, no summary; the last step's checkpoint is kept, its parameters are finite.
  check_finite(result.final_eval, model(), fmt::format("the end of training (step {})", step_),
               checkpoint_kept(last_checkpoint_) + " (try a lower optim.lr)");
  result.steps = step_;
  result.train_seconds = session.train_seconds;
  result.wall_seconds = session.elapsed();
  result.eval_seconds = session.eval_seconds;
  result.steps_per_second =
      session.train_seconds > 0 ? static_cast<double>(step_) / session.train_seconds : 0.0;
  result.ranks = comm_->size();
  const nlohmann::json optimizer_state =
      optimizer_state_json(*comm_, train_step_.shard(), optimizer());
  if (metrics) {
    result.steps_to_95 = first_step_reaching(metrics->evals(), kLearnedAccuracy);
    nlohmann::json summary = summary_to_json(result, config(), parameter_count());
    // What the task read from its data files (conllu, jsonl): sentences, those over max_len.
    for (const DataCount& d : task().data_counts()) summary["data"][d.name] = d.value;
    summary["optimizer_state"] = optimizer_state;
    write_summary(run_dir_, summary);
  }
  return result;
}

// What is due after step_: the metrics row (every log_every steps), the evaluation (every
// eval_every), the checkpoint (every checkpoint_every); each also at the last step.
void Trainer::after_step(StepMetrics& m, Session& session, MetricsWriter* metrics,
                         TrainObserver& obs, TrainResult& result) {
  const TrainConfig& t = config().train;
  auto due = [&](int64_t every) { return step_ == t.steps || (every > 0 && step_ % every == 0); };
  if (due(t.log_every)) {
    m.tokens_per_second =
        session.interval_seconds > 0 ? session.interval_tokens / session.interval_seconds : 0.0;
    session.interval_seconds = 0;
    session.interval_tokens = 0;
    if (metrics) metrics->write_step(m);
    obs.on_log(m);
  }
  obs.on_step(m);
  if (due(t.eval_every)) {
    const Clock::time_point t0 = Clock::now();
    EvalMetrics e = evaluate_and_record();
    session.eval_seconds += seconds_since(t0);
    e.elapsed_seconds = session.elapsed();
    if (metrics) metrics->write_eval(e);
    obs.on_eval(e);
    if (step_ == t.steps) result.final_eval = e;
  }
  if (due(t.checkpoint_every)) checkpoint(session, obs);
}

EvalMetrics Trainer::evaluate() {
  return headlab::evaluate(model_, step_, comm_);
}

EvalMetrics Trainer::evaluate_and_record() {
  if (!config().train.timeline) return evaluate();
  // Every rank passes an accumulator, so that all agree on which batches are weighed; only
  // rank 0's is filled (it evaluates those batches) and only rank 0 writes the row.
  HeadMetricsAccumulator heads(static_cast<int>(model().num_layers()),
                               static_cast<int>(config().model.heads),
                               static_cast<int>(task().relations().size()), true);
  EvalMetrics e = headlab::evaluate(model_, step_, comm_, &heads);
  if (!timeline_) return e;
  nlohmann::json row = timeline_row(e, heads.finish());
  if (task().next_token()) {  // the language-model head scores (train/analysis/induction.h)
    const TrainConfig& t = config().train;
    const EvalStream stream =
        eval_stream(task(), t.eval_batches, t.eval_batch_size, static_cast<uint64_t>(t.eval_seed));
    row["induction"] = induction_timeline_json(
        measure_induction(model_.encoder(), task(), stream, t.timeline_batches));
  }
  timeline_->write(row);
  return e;
}

void Trainer::checkpoint(const Session& session, TrainObserver& obs) {
  save(session.elapsed(), session.train_seconds);
  obs.on_checkpoint(step_, run_dir_ / "checkpoints" / checkpoint_dir_name(step_));
}

}  // namespace headlab
