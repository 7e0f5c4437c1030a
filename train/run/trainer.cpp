#include "train/run/trainer.h"

#include <chrono>
#include <cmath>
#include <optional>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "core/kernels/kernels.h"
#include "core/rng.h"
#include "core/threads.h"
#include "layers/encoder.h"
#include "optim/clip.h"
#include "optim/factory.h"
#include "train/analysis/head_metrics.h"
#include "train/config/model.h"
#include "train/dist/agree.h"
#include "train/dist/comm.h"
#include "train/dist/reduce.h"
#include "train/dist/share.h"
#include "train/io/files.h"
#include "train/run/checkpoint.h"
#include "train/run/metrics.h"
#include "train/run/run_dir.h"
#include "train/run/timeline.h"
#include "train/tasks/registry.h"

namespace headlab {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Streams of train.seed other than the data stream (which uses indices 0, 1, 2, ... = steps):
// far-away stream numbers keep initialisation and dropout independent of every batch.
constexpr uint64_t kInitStream = 0x494e4954ull << 32;     // "INIT"
constexpr uint64_t kDropoutStream = 0x44524f50ull << 32;  // "DROP"

}  // namespace

Trainer::Trainer(Config config, std::filesystem::path run_dir, Comm* comm)
    : config_(std::move(config)),
      run_dir_(std::move(run_dir)),
      own_comm_(comm ? nullptr : std::make_unique<LocalComm>()),
      comm_(comm ? comm : own_comm_.get()),
      batch_(std::make_unique<Batch>()) {
  set_num_threads(static_cast<int>(config_.runtime.threads));
  set_backend(parse_backend(config_.runtime.backend));
  task_ = make_task(config_.task);
  Rng init_rng = Rng::derive(static_cast<uint64_t>(config_.train.seed), kInitStream);
  EncoderOptions options = encoder_options(config_, *task_);
  options.dropout_seed =
      Rng::derive(static_cast<uint64_t>(config_.train.seed), kDropoutStream).next_u64();
  try {
    model_ = std::make_unique<Encoder>(options, init_rng);
  } catch (const Error& e) {
    rethrow_with_position(e, config_);
  }
  const OptimConfig& o = config_.optim;
  OptimizerOptions oo;
  oo.name = o.name;
  oo.lr = o.lr;
  oo.betas = {o.betas.at(0), o.betas.at(1)};
  oo.eps = o.eps;
  oo.weight_decay = o.weight_decay;
  oo.momentum = o.momentum;
  oo.nesterov = o.nesterov;
  oo.clip_norm = o.clip_norm;
  optimizer_ = make_optimizer(oo, model_->named_parameters());
  ScheduleOptions so;
  so.name = config_.schedule.name;
  so.warmup_steps = config_.schedule.warmup_steps;
  so.min_lr = config_.schedule.min_lr;
  so.total_steps = config_.train.steps;
  so.d_model = config_.schedule.d_model;
  schedule_ = std::make_unique<Schedule>(make_schedule(so, o.lr));
  model_->train();
  // Every micro-batch's backward starts from existing zeroed gradients, the first one of the
  // run included, whichever rank computes it (train/dist/reduce.h).
  std::vector<int64_t> sizes;
  for (const auto& p : optimizer_->parameters()) {
    if (!p.var.has_grad()) p.var.grad() = Tensor::zeros(p.var.shape());
    sizes.push_back(p.var.numel());
  }
  reducer_ = std::make_unique<GradientReducer>(*comm_, config_.train.grad_accum, std::move(sizes));
}

Trainer::~Trainer() = default;

int64_t Trainer::parameter_count() const {
  int64_t n = 0;
  for (const auto& p : model_->named_parameters()) n += p.var.numel();
  return n;
}

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

void Trainer::restore(ConfigUse use, CheckpointData c) {
  const std::string where = c.dir.string();
  const char* verb = use == ConfigUse::resume ? "resume from" : "evaluate";
  if (!c.run_id.empty() && !run_id().empty() && c.run_id != run_id())
    fail(
        "cannot {} '{}': it was written by run {}, but '{}' is run {} (a checkpoint copied in "
        "from another run directory?)",
        verb, where, c.run_id, run_dir_.string(), run_id());
  const Config saved = parse_config(c.resolved_config, (c.dir / "config.resolved.toml").string());
  // A run is defined by its global batch, not by how it is split (docs/distributed.md); an
  // evaluation runs on one process whatever the run's ranks were.
  const int64_t saved_ranks =
      use == ConfigUse::resume ? c.extra.value("world_size", int64_t{1}) : 1;
  const int64_t ranks = use == ConfigUse::resume ? comm_->size() : 1;
  const std::vector<std::string> diffs =
      identity_differences(saved, config_, use, saved_ranks, ranks);
  if (!diffs.empty()) {
    std::string list;
    for (const auto& d : diffs) list += (list.empty() ? "" : "; ") + d;
    if (use == ConfigUse::resume)
      fail(
          "cannot resume from '{}': the config changes what the run computes ({}); restore "
          "those values, or start a new run (--overwrite, or another --out)",
          where, list);
    fail(
        "cannot evaluate '{}': the config changes what the run computes ({}); only train.eval_* "
        "and runtime.* may differ from the run's",
        where, list);
  }
  if (use == ConfigUse::resume && c.step > config_.train.steps)
    fail("cannot resume from '{}': it is at step {} but train.steps is {}", where, c.step,
         config_.train.steps);
  if (c.data_cursor != c.step)
    fail("cannot {} '{}': data cursor {} differs from step {}", verb, where, c.data_cursor, c.step);
  try {
    model_->load_state_dict(c.model);
    optimizer_->load_state_dict(c.optimizer);
  } catch (const Error& e) {
    fail("cannot {} '{}': {}", verb, where, e.what());
  }
  if (optimizer_->step_count() != c.step)
    fail("cannot {} '{}': optimizer.safetensors is at step {} but state.json at {}", verb, where,
         optimizer_->step_count(), c.step);
  step_ = c.step;
  last_checkpoint_ = c.step;
  resumed_elapsed_ = c.extra.value("elapsed_seconds", 0.0);
  resumed_train_seconds_ = c.extra.value("train_seconds", 0.0);
}

void Trainer::share_resumed_state() {
  if (comm_->size() == 1) return;
  StateDict model = comm_->is_root() ? model_->state_dict() : StateDict{};
  StateDict optimizer = comm_->is_root() ? optimizer_->state_dict() : StateDict{};
  broadcast_state_dict(*comm_, 0, model);
  broadcast_state_dict(*comm_, 0, optimizer);
  int64_t steps[2] = {step_, last_checkpoint_};
  double seconds[2] = {resumed_elapsed_, resumed_train_seconds_};
  broadcast_values(*comm_, 0, std::span<int64_t>(steps));
  broadcast_values(*comm_, 0, std::span<double>(seconds));
  if (comm_->is_root()) return;
  model_->load_state_dict(model);
  optimizer_->load_state_dict(optimizer);
  step_ = steps[0];
  last_checkpoint_ = steps[1];
  resumed_elapsed_ = seconds[0];
  resumed_train_seconds_ = seconds[1];
}

void Trainer::check_finite_state(const StateDict& model, const StateDict& optimizer) const {
  for (const StateDict* dict : {&model, &optimizer})
    for (const NamedTensor& t : *dict) {
      const float* x = t.tensor.data();
      for (int64_t i = 0; i < t.tensor.numel(); ++i) {
        if (std::isfinite(x[i])) continue;
        const std::string kept =
            last_checkpoint_ >= 0
                ? fmt::format("the last checkpoint (step {}) is untouched", last_checkpoint_)
                : std::string("no checkpoint was written");
        throw NonFiniteError(
            step_, fmt::format("training stopped at step {}: the update made {} '{}' {}; {} (try "
                               "a lower optim.lr or a larger optim.eps)",
                               step_, dict == &model ? "the parameter" : "the optimizer state",
                               t.name, std::isnan(x[i]) ? "NaN" : "infinite", kept));
      }
    }
}

void Trainer::save(double elapsed, double train_seconds) {
  CheckpointData c;
  c.model = model_->state_dict();
  c.optimizer = optimizer_->state_dict();
  check_finite_state(c.model, c.optimizer);  // every rank alike: they hold the same state
  last_checkpoint_ = step_;
  if (!comm_->is_root()) return;  // rank 0 alone writes the run directory
  c.step = step_;
  c.run_id = run_id();
  c.data_cursor = step_;
  c.extra = {{"elapsed_seconds", elapsed},
             {"train_seconds", train_seconds},
             {"world_size", comm_->size()}};
  c.resolved_config = to_toml(config_);
  c.config_hash = config_hash(config_);
  save_checkpoint(run_dir_, c, config_.train.keep_checkpoints);
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
  const TrainConfig& t = config_.train;
  Session session{.resumed_elapsed = resumed_elapsed_, .train_seconds = resumed_train_seconds_};

  // Rank 0 alone writes the run directory (the others' metrics are the same numbers).
  std::optional<MetricsWriter> metrics;
  if (comm_->is_root()) {
    create_directories(run_dir_);
    write_file_atomic(run_dir_ / "config.resolved.toml", to_toml(config_));
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
    StepMetrics m = train_step();
    const double dt = seconds_since(t0);
    session.train_seconds += dt;
    session.interval_seconds += dt;
    session.interval_tokens += t.batch_size * t.grad_accum * comm_->size() * task_->seq_len();
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
  result.steps = step_;
  result.train_seconds = session.train_seconds;
  result.wall_seconds = session.elapsed();
  result.eval_seconds = session.eval_seconds;
  result.steps_per_second =
      session.train_seconds > 0 ? static_cast<double>(step_) / session.train_seconds : 0.0;
  result.ranks = comm_->size();
  if (metrics) {
    result.steps_to_95 = first_step_reaching(metrics->evals(), 0.95);
    write_summary(run_dir_, summary_to_json(result, config_, parameter_count()));
  }
  return result;
}

// What is due after step_: the metrics row (every log_every steps), the evaluation (every
// eval_every), the checkpoint (every checkpoint_every); each also at the last step.
void Trainer::after_step(StepMetrics& m, Session& session, MetricsWriter* metrics,
                         TrainObserver& obs, TrainResult& result) {
  const TrainConfig& t = config_.train;
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

EvalMetrics Trainer::evaluate_and_record() {
  if (!config_.train.timeline) return evaluate();
  // Every rank passes an accumulator, so that all agree on which batches are weighed; only
  // rank 0's is filled (it evaluates those batches) and only rank 0 writes the row.
  HeadMetricsAccumulator heads(static_cast<int>(model_->num_layers()),
                               static_cast<int>(config_.model.heads),
                               static_cast<int>(task_->relations().size()), true);
  EvalMetrics e = evaluate(&heads);
  if (timeline_) timeline_->write(timeline_row(e, heads.finish()));
  return e;
}

void Trainer::checkpoint(const Session& session, TrainObserver& obs) {
  save(session.elapsed(), session.train_seconds);
  obs.on_checkpoint(step_, run_dir_ / "checkpoints" / checkpoint_dir_name(step_));
}

}  // namespace headlab
