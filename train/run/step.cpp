// Trainer's training step and evaluation (train/run/trainer.h): this rank's micro-batches, the
// canonical reduction of their gradients with every other rank's (train/dist/reduce.h), the
// global batch's metrics; and an evaluation split over the ranks by batch.

#include <algorithm>
#include <cmath>
#include <vector>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "core/elementwise.h"
#include "layers/encoder.h"
#include "optim/clip.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "train/analysis/head_metrics.h"
#include "train/dist/comm.h"
#include "train/dist/reduce.h"
#include "train/run/trainer.h"
#include "train/tasks/task.h"

namespace headlab {
namespace {

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
      int32_t best = 0;
      ew::argmax_rows(x + i * classes, 1, classes, &best);
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

// One micro-batch's share of the step's metrics (plain data: ranks exchange it as bytes).
struct MicroStats {
  double loss = 0;  // mean cross-entropy over its counted tokens
  int64_t tokens = 0;
  int64_t correct = 0;
};

// Every rank's micro-batches' stats, in global micro-batch order.
std::vector<MicroStats> gather_stats(Comm& comm, const std::vector<MicroStats>& local) {
  if (comm.size() == 1) return local;
  std::vector<MicroStats> all(local.size() * static_cast<size_t>(comm.size()));
  comm.allgather(bytes_of(std::span(local)), bytes_of(std::span(all)));
  return all;
}

// One evaluation batch's counts: [loss, tokens, correct, relation hits...] (doubles hold the
// counts exactly), so ranks exchange them as one array.
std::vector<double> eval_record(const Tally& tally, double loss, size_t relations) {
  std::vector<double> r = {loss, static_cast<double>(tally.tokens),
                           static_cast<double>(tally.correct)};
  for (size_t k = 0; k < relations; ++k)
    r.push_back(k < tally.relation_hits.size() ? static_cast<double>(tally.relation_hits[k]) : 0);
  return r;
}

}  // namespace

std::vector<std::span<float>> Trainer::gradients() {
  std::vector<std::span<float>> g;
  for (const auto& p : optimizer_->parameters())
    g.emplace_back(p.var.grad().data(), static_cast<size_t>(p.var.numel()));
  return g;
}

double Trainer::last_reduce_seconds() const {
  return reducer_->last_seconds();
}

StepMetrics Trainer::train_step() {
  const TrainConfig& t = config_.train;
  const int64_t s = step_ + 1;
  std::vector<MicroStats> local(static_cast<size_t>(t.grad_accum));
  for (int64_t a = 0; a < t.grad_accum; ++a) {
    if (a > 0) optimizer_->zero_grad();  // each micro-batch's gradient alone
    const int64_t first = (comm_->rank() * t.grad_accum + a) * t.batch_size;
    task_->generate_sentences(static_cast<uint64_t>(t.seed), step_, first, t.batch_size, *batch_);
    model_->dropout_rng().set_position(static_cast<uint64_t>(step_), static_cast<uint64_t>(first));
    feature_spans(*batch_, spans_);
    EncoderOutput out = model_->forward(spans_, batch_->batch_size, batch_->seq_len);
    Var loss = cross_entropy(out.logits, batch_->labels, kIgnoreIndex);
    Tally tally;
    tally.add(out.logits.value(), batch_->labels, *task_, false);
    loss.backward();
    local[static_cast<size_t>(a)] = {loss.value().item(), tally.tokens, tally.correct};
    reducer_->add(gradients(), tally.tokens);
  }
  // The global batch's loss and accuracy: token-weighted, summed in micro-batch order, so every
  // rank (and one process with the same micro-batches) gets the same numbers.
  double loss_sum = 0;
  int64_t tokens = 0, correct = 0;
  for (const MicroStats& ms : gather_stats(*comm_, local)) {
    loss_sum += ms.loss * static_cast<double>(ms.tokens);
    tokens += ms.tokens;
    correct += ms.correct;
  }
  if (tokens == 0) fail("training step {}: the batch has no labelled token", s);
  StepMetrics m;
  m.step = s;
  m.total_steps = t.steps;
  m.loss = loss_sum / static_cast<double>(tokens);
  m.accuracy = static_cast<double>(correct) / static_cast<double>(tokens);
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
  reducer_->finish(gradients(), tokens);
  m.grad_norm = clip_grad_norm(optimizer_->parameters(), config_.optim.clip_norm);
  if (!std::isfinite(m.grad_norm)) stop("gradient norm", m.grad_norm);
  m.lr = schedule_->lr_at(s);
  optimizer_->set_lr(m.lr);
  optimizer_->step();
  optimizer_->zero_grad();
  step_ = s;
  return m;
}

namespace {

// Which rank evaluates which batch: the first `weighed` batches (those the timeline reads
// attention from) on rank 0, so that their accumulation runs in batch order in one process
// whatever the number of ranks; the rest round robin. Each rank keeps its batches' records in
// slots, in batch order.
struct EvalSplit {
  int64_t batches, weighed, ranks;
  int64_t owner(int64_t i) const { return i < weighed ? 0 : (i - weighed) % ranks; }
  int64_t slot(int64_t i) const {
    if (i < weighed) return i;
    const int64_t k = i - weighed;
    return (k % ranks == 0 ? weighed : 0) + k / ranks;
  }
  int64_t slots() const { return weighed + (batches - weighed + ranks - 1) / ranks; }
};

}  // namespace

EvalMetrics Trainer::evaluate(HeadMetricsAccumulator* heads) {
  const TrainConfig& t = config_.train;
  struct TrainModeRestorer {
    Encoder& model;
    ~TrainModeRestorer() { model.train(); }
  } restore{*model_};
  NoGradGuard no_grad;
  model_->eval();
  // The first train.timeline_batches batches (0: all) also give their weights (one [B, h, T, T]
  // per layer, the unfused path) against the gold partners, on every process count alike.
  const int64_t weighed =
      heads ? (t.timeline_batches == 0 ? t.eval_batches
                                       : std::min(t.timeline_batches, t.eval_batches))
            : 0;
  const EvalSplit split{t.eval_batches, weighed, comm_->size()};
  const size_t relations = task_->relations().size(), width = 3 + relations;
  std::vector<double> mine(static_cast<size_t>(split.slots()) * width, 0.0);
  Batch batch;
  for (int64_t i = 0; i < t.eval_batches; ++i) {
    if (split.owner(i) != comm_->rank()) continue;
    task_->generate(static_cast<uint64_t>(t.eval_seed), i, t.eval_batch_size, batch);
    feature_spans(batch, spans_);
    const bool weigh = i < weighed;
    EncoderOutput out = model_->forward(spans_, batch.batch_size, batch.seq_len, nullptr, weigh);
    if (weigh) {
      std::vector<Tensor> weights;
      for (const Var& w : out.weights) weights.push_back(w.value());
      heads->add(weights, batch.partners, labelled_tokens(batch));
    }
    Tally tally;
    tally.add(out.logits.value(), batch.labels, *task_, true);
    const double loss = cross_entropy(out.logits, batch.labels, kIgnoreIndex).value().item();
    const std::vector<double> r = eval_record(tally, loss, relations);
    std::copy(r.begin(), r.end(),
              mine.begin() + static_cast<std::ptrdiff_t>(split.slot(i) * width));
  }
  std::vector<double> all(mine.size() * static_cast<size_t>(split.ranks));
  comm_->allgather(bytes_of(std::span<const double>(mine)), bytes_of(std::span(all)));
  // Summed in batch order: cross_entropy is the mean over a batch's counted tokens, weighted
  // back by their number.
  double loss_sum = 0, tokens = 0, correct = 0;
  std::vector<double> hits(relations, 0.0);
  for (int64_t i = 0; i < t.eval_batches; ++i) {
    const double* r = all.data() + (split.owner(i) * split.slots() + split.slot(i)) * width;
    loss_sum += r[0] * r[1];
    tokens += r[1];
    correct += r[2];
    for (size_t k = 0; k < relations; ++k) hits[k] += r[3 + k];
  }
  EvalMetrics e;
  e.step = step_;
  e.tokens = static_cast<int64_t>(tokens);
  e.loss = tokens > 0 ? loss_sum / tokens : 0.0;
  e.accuracy = tokens > 0 ? correct / tokens : 0.0;
  e.relations = task_->relations();
  for (double c : hits) e.relation_accuracy.push_back(tokens > 0 ? c / tokens : 0.0);
  return e;
}

}  // namespace headlab
