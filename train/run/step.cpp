// The training step (step.h): this rank's micro-batches, the canonical reduction of their
// gradients with every other rank's (train/distributed/reduce.h), the global batch's metrics, the
// update.

#include "train/run/step.h"

#include <algorithm>
#include <cmath>

#include "autograd/ops.h"
#include "layers/encoder.h"
#include "optim/clip.h"
#include "optim/factory.h"
#include "train/config/model.h"
#include "train/distributed/comm.h"
#include "train/distributed/reduce.h"
#include "train/run/model.h"
#include "train/run/optimizer_shard.h"

namespace headlab {
namespace {

[[noreturn]] void stop(int64_t s, const char* what, double value) {
  const char* text = std::isnan(value) ? "NaN" : value > 0 ? "+Inf" : "-Inf";
  throw NonFiniteError(
      s,
      fmt::format("training stopped at step {}: the {} is {}, before the update", s, what, text));
}

}  // namespace

TrainStep::TrainStep(RunModel& model, Comm& comm)
    : model_(model),
      comm_(comm),
      optimizer_(make_optimizer(model.config().optim, model.encoder().named_parameters())),
      schedule_(std::make_unique<Schedule>(
          make_schedule(schedule_options(model.config()), model.config().optim.lr))),
      counts_(static_cast<size_t>(model.config().train.grad_accum)) {
  shard_ =
      std::make_unique<OptimizerShard>(comm_, *optimizer_, model.config().runtime.shard_optimizer);
  // Every micro-batch's backward starts from existing zeroed gradients, the first one of the
  // run included, whichever rank computes it (train/distributed/reduce.h).
  std::vector<int64_t> sizes;
  for (const auto& p : optimizer_->parameters()) {
    if (!p.var.has_grad()) p.var.grad() = Tensor::zeros(p.var.shape());
    sizes.push_back(p.var.numel());
  }
  reducer_ =
      std::make_unique<GradientReducer>(comm_, model.config().train.grad_accum, std::move(sizes));
  const auto& params = optimizer_->parameters();
  for (size_t i = 0; i < params.size(); ++i) parameter_index_[params[i].var.node()] = i;
  leaf_done_ = [this](const Var& leaf) {
    const auto it = parameter_index_.find(leaf.node());
    if (it == parameter_index_.end()) return;  // not a parameter the optimizer updates
    reducer_->ready(it->second, std::span(leaf.grad().data(), static_cast<size_t>(leaf.numel())));
  };
}

TrainStep::~TrainStep() = default;

double TrainStep::last_reduce_seconds() const {
  return reducer_->last_seconds();
}

std::span<const std::span<float>> TrainStep::gradients() {
  gradients_.clear();
  for (const auto& p : optimizer_->parameters())
    gradients_.emplace_back(p.var.grad().data(), static_cast<size_t>(p.var.numel()));
  return gradients_;
}

StepMetrics TrainStep::operator()(int64_t step) {
  const TrainConfig& t = model_.config().train;
  for (int64_t a = 0; a < t.grad_accum; ++a) {
    if (a > 0) optimizer_->zero_grad();  // each micro-batch's gradient alone
    Var loss = micro_batch_loss(step, a);
    const int64_t tokens = counts_[static_cast<size_t>(a)].tokens;
    if (a == t.grad_accum - 1 && reducer_->overlaps()) {
      // The chain runs on the gradients the backward has finished while it goes on.
      reducer_->begin_last(tokens);
      loss.tape()->backward(loss, nullptr, &leaf_done_);
      reducer_->end_last(gradients());
    } else {
      loss.backward();
      reducer_->add(gradients(), tokens);
    }
  }
  const EvalCounts batch = global_counts(step + 1);  // of the global batch, on every rank alike
  StepMetrics m{
      .step = step + 1, .total_steps = t.steps, .loss = batch.loss(), .accuracy = batch.accuracy()};
  if (!std::isfinite(m.loss)) stop(m.step, "training loss", m.loss);
  reducer_->finish(gradients(), batch.tokens);
  m.grad_norm = clip_grad_norm(optimizer_->parameters(), model_.config().optim.clip_norm);
  if (!std::isfinite(m.grad_norm)) stop(m.step, "gradient norm", m.grad_norm);
  m.lr = schedule_->lr_at(m.step);
  optimizer_->set_lr(m.lr);
  optimizer_->step();
  shard_->broadcast_parameters();
  optimizer_->zero_grad();
  return m;
}

void TrainStep::trial(int64_t sentences) {
  const int64_t n = std::max<int64_t>(1, std::min(sentences, model_.config().train.batch_size));
  loss_of_sentences(0, 0, n).loss.backward();
  optimizer_->zero_grad();
}

TrainStep::SentencesLoss TrainStep::loss_of_sentences(int64_t step, int64_t first, int64_t n) {
  model_.task().generate_sentences(static_cast<uint64_t>(model_.config().train.seed), step, first,
                                   n, batch_);
  Encoder& encoder = model_.encoder();
  // Early dropout (model.dropout_steps): a function of the step alone, so a resumed run and
  // every rank see the same steps with dropout.
  const int64_t dropout_steps = model_.config().model.dropout_steps;
  encoder.set_dropout(dropout_steps == 0 || step < dropout_steps);
  encoder.dropout_rng().set_position(static_cast<uint64_t>(step), static_cast<uint64_t>(first));
  batch_.feature_spans(features_);
  EncoderOutput out = encoder.forward(features_, batch_.batch_size, batch_.seq_len);
  Var loss = cross_entropy(out.logits, batch_.labels, kIgnoreIndex);
  return {out.logits, loss};
}

Var TrainStep::micro_batch_loss(int64_t step, int64_t a) {
  const TrainConfig& t = model_.config().train;
  const int64_t first = (comm_.rank() * t.grad_accum + a) * t.batch_size;  // its first sentence
  const SentencesLoss l = loss_of_sentences(step, first, t.batch_size);
  counts_[static_cast<size_t>(a)] =
      batch_counts(l.logits.value(), batch_.labels, nullptr, l.loss.value().item());
  return l.loss;
}

EvalCounts TrainStep::global_counts(int64_t s) {
  // (micro_ and micro_all_ keep their capacity: no allocation per step)
  micro_.clear();
  for (const EvalCounts& c : counts_) micro_.push_back({c.loss_sum, c.tokens, c.correct});
  std::span<const MicroStats> all = micro_;
  if (comm_.size() > 1) {
    micro_all_.resize(micro_.size() * static_cast<size_t>(comm_.size()));
    comm_.allgather(bytes_of(all), bytes_of(std::span(micro_all_)));
    all = micro_all_;
  }
  // Token-weighted, summed in global micro-batch order, so every rank (and one process with the
  // same micro-batches) gets the same numbers.
  EvalCounts global;
  for (const MicroStats& ms : all) {
    global.loss_sum += ms.loss_sum;
    global.tokens += ms.tokens;
    global.correct += ms.correct;
  }
  if (global.tokens == 0) fail("training step {}: the batch has no labelled token", s);
  return global;
}

}  // namespace headlab
