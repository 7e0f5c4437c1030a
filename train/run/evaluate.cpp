#include "train/run/evaluate.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "autograd/grad_mode.h"
#include "layers/encoder.h"
#include "train/analysis/head_metrics.h"
#include "train/distributed/comm.h"
#include "train/eval/evaluation.h"
#include "train/run/model.h"
#include "train/run/step.h"

namespace headlab {
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

// A batch's counts as one record of doubles (which hold the counts exactly), so that ranks
// exchange them as one array: [loss_sum, tokens, correct, relation_correct...].
void write_record(const EvalCounts& c, double* r) {
  r[0] = c.loss_sum;
  r[1] = static_cast<double>(c.tokens);
  r[2] = static_cast<double>(c.correct);
  for (size_t k = 0; k < c.relation_correct.size(); ++k)
    r[3 + k] = static_cast<double>(c.relation_correct[k]);
}

EvalCounts read_record(const double* r, size_t relations) {
  EvalCounts c;
  c.loss_sum = r[0];
  c.tokens = static_cast<int64_t>(r[1]);
  c.correct = static_cast<int64_t>(r[2]);
  for (size_t k = 0; k < relations; ++k)
    c.relation_correct.push_back(static_cast<int64_t>(r[3 + k]));
  return c;
}

}  // namespace

EvalMetrics evaluate(RunModel& model, int64_t step, Comm* comm, HeadMetricsAccumulator* heads) {
  LocalComm alone;
  Comm& ranks = comm ? *comm : alone;
  const TrainConfig& t = model.config().train;
  const Task& task = model.task();
  Encoder& encoder = model.encoder();
  struct TrainModeRestorer {
    Encoder& model;
    ~TrainModeRestorer() { model.train(); }
  } restore{encoder};
  NoGradGuard no_grad;
  encoder.eval();
  const EvalStream stream =
      eval_stream(task, t.eval_batches, t.eval_batch_size, static_cast<uint64_t>(t.eval_seed));
  const int64_t weighed =
      heads ? (t.timeline_batches == 0 ? stream.batches
                                       : std::min(t.timeline_batches, stream.batches))
            : 0;
  const EvalSplit split{stream.batches, weighed, ranks.size()};
  const size_t relations = task.relations().size(), width = 3 + relations;
  std::vector<double> mine(static_cast<size_t>(split.slots()) * width, 0.0);
  Batch batch;
  std::vector<Tensor> weights;
  for (int64_t i = 0; i < stream.batches; ++i) {
    if (split.owner(i) != ranks.rank()) continue;
    stream.batch(task, i, batch);
    const bool weigh = i < weighed;
    const EvalCounts counts = evaluate_batch(encoder, batch, task, weigh ? &weights : nullptr);
    if (weigh) heads->add(weights, batch.partners, labelled_tokens(batch));
    write_record(counts, mine.data() + split.slot(i) * static_cast<int64_t>(width));
  }
  std::vector<double> all(mine.size() * static_cast<size_t>(split.ranks));
  ranks.allgather(bytes_of(std::span<const double>(mine)), bytes_of(std::span(all)));
  EvalCounts total;
  total.relation_correct.resize(relations, 0);
  for (int64_t i = 0; i < stream.batches; ++i)  // in batch order
    total.add(read_record(
        all.data() + (split.owner(i) * split.slots() + split.slot(i)) * static_cast<int64_t>(width),
        relations));
  EvalMetrics e;
  e.step = step;
  e.tokens = total.tokens;
  e.from_set = stream.from_set();
  e.sentences = e.from_set ? stream.set_sentences : stream.batches * stream.batch_size;
  e.loss = total.loss();
  e.accuracy = total.accuracy();
  e.relations = task.relations();
  e.relation_accuracy = total.relation_accuracy();
  return e;
}

void check_finite(const EvalMetrics& e, const Module& model, const std::string& what,
                  const std::string& hint) {
  const char* bad = nullptr;
  double value = 0;
  const auto check = [&](const char* name, double v) {
    if (!bad && !std::isfinite(v)) bad = name, value = v;
  };
  check("loss", e.loss);
  check("accuracy", e.accuracy);
  for (double a : e.relation_accuracy) check("component accuracy", a);
  if (!bad) return;
  // The largest weight says whether the checkpoint exploded or the evaluation overflowed.
  double largest = 0;
  std::string where = "no parameter";
  for (const NamedParameter& p : model.named_parameters()) {
    const Tensor& w = p.var.value();
    const float* x = w.data();
    for (int64_t i = 0; i < w.numel(); ++i)
      if (!(std::fabs(x[i]) <= largest)) {  // NaN too
        largest = std::fabs(x[i]);
        where = p.name;
      }
  }
  const char* text = std::isnan(value) ? "NaN" : value > 0 ? "Inf" : "-Inf";
  throw NonFiniteError(e.step, fmt::format("the evaluation {} is {} at {} (largest |w| = {:.3g}, "
                                           "in {}): {}",
                                           bad, text, what, largest, where, hint));
}

}  // namespace headlab
