#include "train/run/trainer.h"

#include <chrono>
#include <cmath>

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

// Correct predictions over non-ignored rows of logits [rows, C]; per relation too
// (Task::relation_correct) when asked.
struct Tally {
  int64_t tokens = 0, correct = 0;
  std::vector<int64_t> relation_hits;

  // relations: also score each relation (evaluation; allocates).
  void add(const Tensor& logits, const std::vector<int32_t>& labels, const Task& task,
           bool relations) {
    const int64_t classes = logits.size(-1);
    const int64_t rows = logits.numel() / classes;
    const float* x = logits.data();
    if (relations) relation_hits.resize(task.relations().size(), 0);
    for (int64_t i = 0; i < rows; ++i) {
      const int32_t label = labels[static_cast<size_t>(i)];
      if (label == kIgnoreIndex) continue;
      const float* row = x + i * classes;
      int32_t best = 0;
      for (int64_t c = 1; c < classes; ++c)
        if (row[c] > row[best]) best = static_cast<int32_t>(c);
      ++tokens;
      correct += best == label;
      for (size_t r = 0; r < relation_hits.size(); ++r)
        relation_hits[r] += task.relation_correct(best, label, static_cast<int>(r));
    }
  }
  double accuracy() const { return tokens ? static_cast<double>(correct) / tokens : 0.0; }
};

// Views of the batch's feature arrays, in `spans` (reused: no allocation once sized).
void feature_spans(const Batch& b, std::vector<std::span<const int32_t>>& spans) {
  spans.clear();
  for (const auto& f : b.features) spans.emplace_back(f);
}

}  // namespace

Trainer::Trainer(Config config, std::filesystem::path run_dir)
    : config_(std::move(config)), run_dir_(std::move(run_dir)), batch_(std::make_unique<Batch>()) {
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
  if (checkpoint.empty() && !latest_checkpoint(run_dir_))
    fail("no checkpoint in '{}' ('{}' does not exist){}", run_dir_.string(),
         (run_dir_ / "checkpoints" / "latest").string(),
         use == ConfigUse::resume ? ": the run stopped before its first checkpoint; start it "
                                    "again with --overwrite"
                                  : "");
  restore(use, checkpoint.empty() ? load_checkpoint(run_dir_) : load_checkpoint_dir(checkpoint));
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
  const std::vector<std::string> diffs = identity_differences(saved, config_, use);
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
  auto rng = c.rng_states.find("dropout");
  if (rng == c.rng_states.end())
    fail("cannot {} '{}': state.json has no \"dropout\" RNG state", verb, where);
  try {
    model_->load_state_dict(c.model);
    optimizer_->load_state_dict(c.optimizer);
  } catch (const Error& e) {
    fail("cannot {} '{}': {}", verb, where, e.what());
  }
  if (optimizer_->step_count() != c.step)
    fail("cannot {} '{}': optimizer.safetensors is at step {} but state.json at {}", verb, where,
         optimizer_->step_count(), c.step);
  model_->dropout_rng().set_state(Rng::parse_state(rng->second));
  step_ = c.step;
  last_checkpoint_ = c.step;
  resumed_elapsed_ = c.extra.value("elapsed_seconds", 0.0);
  resumed_train_seconds_ = c.extra.value("train_seconds", 0.0);
}

StepMetrics Trainer::train_step() {
  const TrainConfig& t = config_.train;
  const int64_t s = step_ + 1;
  task_->generate(static_cast<uint64_t>(t.seed), step_, t.batch_size, *batch_);
  feature_spans(*batch_, spans_);
  EncoderOutput out = model_->forward(spans_, batch_->batch_size, batch_->seq_len);
  Var loss = cross_entropy(out.logits, batch_->labels, kIgnoreIndex);
  StepMetrics m;
  m.step = s;
  m.total_steps = t.steps;
  m.loss = loss.value().item();
  Tally tally;
  tally.add(out.logits.value(), batch_->labels, *task_, false);
  m.accuracy = tally.accuracy();
  loss.backward();
  auto stop = [&](const char* what, double value) {
    const std::string kept =
        last_checkpoint_ >= 0
            ? fmt::format("the last checkpoint (step {}) is untouched", last_checkpoint_)
            : std::string("no checkpoint was written");
    const char* text = std::isnan(value) ? "NaN" : value > 0 ? "+Inf" : "-Inf";
    throw NonFiniteError(s, fmt::format("training stopped at step {}: the {} is {}, before the "
                                        "update; {} (try a lower optim.lr)",
                                        s, what, text, kept));
  };
  if (!std::isfinite(m.loss)) stop("training loss", m.loss);
  m.grad_norm = clip_grad_norm(optimizer_->parameters(), config_.optim.clip_norm);
  if (!std::isfinite(m.grad_norm)) stop("gradient norm", m.grad_norm);
  m.lr = schedule_->lr_at(s);
  optimizer_->set_lr(m.lr);
  optimizer_->step();
  optimizer_->zero_grad();
  step_ = s;
  return m;
}

EvalMetrics Trainer::evaluate(HeadMetricsAccumulator* heads) {
  const TrainConfig& t = config_.train;
  struct TrainModeRestorer {
    Encoder& model;
    ~TrainModeRestorer() { model.train(); }
  } restore{*model_};
  NoGradGuard no_grad;
  model_->eval();
  Batch batch;
  Tally tally;
  double loss_sum = 0;
  for (int64_t i = 0; i < t.eval_batches; ++i) {
    task_->generate(static_cast<uint64_t>(t.eval_seed), i, t.eval_batch_size, batch);
    feature_spans(batch, spans_);
    // The first train.timeline_batches batches (0: all) also give their weights (one [B, h,
    // T, T] per layer, the unfused path) against the gold partners.
    const bool weigh = heads && (t.timeline_batches == 0 || i < t.timeline_batches);
    EncoderOutput out = model_->forward(spans_, batch.batch_size, batch.seq_len, nullptr, weigh);
    if (weigh) {
      std::vector<Tensor> weights;
      for (const Var& w : out.weights) weights.push_back(w.value());
      heads->add(weights, batch.partners, labelled_tokens(batch));
    }
    const int64_t before = tally.tokens;
    tally.add(out.logits.value(), batch.labels, *task_, true);
    // cross_entropy is the mean over counted tokens; weight it back by their number.
    const double loss = cross_entropy(out.logits, batch.labels, kIgnoreIndex).value().item();
    loss_sum += loss * static_cast<double>(tally.tokens - before);
  }
  EvalMetrics e;
  e.step = step_;
  e.tokens = tally.tokens;
  e.loss = tally.tokens ? loss_sum / static_cast<double>(tally.tokens) : 0.0;
  e.accuracy = tally.accuracy();
  e.relations = task_->relations();
  for (int64_t c : tally.relation_hits)
    e.relation_accuracy.push_back(tally.tokens ? static_cast<double>(c) / tally.tokens : 0.0);
  return e;
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
  c.step = step_;
  c.model = model_->state_dict();
  c.optimizer = optimizer_->state_dict();
  check_finite_state(c.model, c.optimizer);
  c.run_id = run_id();
  c.rng_states["dropout"] = model_->dropout_rng().state_string();
  c.data_cursor = step_;
  c.extra = {{"elapsed_seconds", elapsed}, {"train_seconds", train_seconds}};
  c.resolved_config = to_toml(config_);
  c.config_hash = config_hash(config_);
  save_checkpoint(run_dir_, c, config_.train.keep_checkpoints);
  last_checkpoint_ = step_;
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

  create_directories(run_dir_);
  write_file_atomic(run_dir_ / "config.resolved.toml", to_toml(config_));
  MetricsWriter metrics(run_dir_ / "metrics.jsonl", step_ > 0 ? step_ : -1);
  timeline_ = t.timeline ? std::make_unique<TimelineWriter>(run_dir_ / "timeline.jsonl",
                                                            step_ > 0 ? step_ : -1)
                         : nullptr;

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
    session.interval_tokens += t.batch_size * task_->seq_len();
    m.elapsed_seconds = session.elapsed();
    result.final_loss = m.loss;
    after_step(m, session, metrics, obs, result);
    if (step_ < t.steps && obs.should_stop()) {
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
  result.steps_to_95 = first_step_reaching(metrics.evals(), 0.95);
  write_summary(run_dir_, summary_to_json(result, config_, parameter_count()));
  return result;
}

// What is due after step_: the metrics row (every log_every steps), the evaluation (every
// eval_every), the checkpoint (every checkpoint_every); each also at the last step.
void Trainer::after_step(StepMetrics& m, Session& session, MetricsWriter& metrics,
                         TrainObserver& obs, TrainResult& result) {
  const TrainConfig& t = config_.train;
  auto due = [&](int64_t every) { return step_ == t.steps || (every > 0 && step_ % every == 0); };
  if (due(t.log_every)) {
    m.tokens_per_second =
        session.interval_seconds > 0 ? session.interval_tokens / session.interval_seconds : 0.0;
    session.interval_seconds = 0;
    session.interval_tokens = 0;
    metrics.write_step(m);
    obs.on_log(m);
  }
  obs.on_step(m);
  if (due(t.eval_every)) {
    const Clock::time_point t0 = Clock::now();
    EvalMetrics e = evaluate_and_record();
    session.eval_seconds += seconds_since(t0);
    e.elapsed_seconds = session.elapsed();
    metrics.write_eval(e);
    obs.on_eval(e);
    if (step_ == t.steps) result.final_eval = e;
  }
  if (due(t.checkpoint_every)) checkpoint(session, obs);
}

EvalMetrics Trainer::evaluate_and_record() {
  if (!timeline_) return evaluate();
  HeadMetricsAccumulator heads(static_cast<int>(model_->num_layers()),
                               static_cast<int>(config_.model.heads),
                               static_cast<int>(task_->relations().size()), true);
  EvalMetrics e = evaluate(&heads);
  timeline_->write(timeline_row(e, heads.finish()));
  return e;
}

void Trainer::checkpoint(const Session& session, TrainObserver& obs) {
  save(session.elapsed(), session.train_seconds);
  obs.on_checkpoint(step_, run_dir_ / "checkpoints" / checkpoint_dir_name(step_));
}

}  // namespace headlab
