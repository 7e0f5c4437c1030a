#include "train/eval/evaluation.h"

#include "autograd/ops.h"
#include "core/elementwise.h"
#include "core/error.h"
#include "layers/encoder.h"

namespace headlab {

void EvalCounts::add(const EvalCounts& other) {
  tokens += other.tokens;
  correct += other.correct;
  loss_sum += other.loss_sum;
  if (relation_correct.empty()) relation_correct.resize(other.relation_correct.size(), 0);
  if (relation_correct.size() != other.relation_correct.size())
    fail("evaluation: counts of {} relations added to counts of {}", other.relation_correct.size(),
         relation_correct.size());
  for (size_t r = 0; r < relation_correct.size(); ++r)
    relation_correct[r] += other.relation_correct[r];
}

std::vector<double> EvalCounts::relation_accuracy() const {
  std::vector<double> out;
  for (int64_t c : relation_correct)
    out.push_back(tokens > 0 ? static_cast<double>(c) / static_cast<double>(tokens) : 0.0);
  return out;
}

void count_predictions(const Tensor& logits, std::span<const int32_t> labels, const Task* task,
                       EvalCounts& counts) {
  const int64_t classes = logits.size(-1);
  const int64_t rows = logits.numel() / classes;
  if (static_cast<int64_t>(labels.size()) != rows)
    fail("evaluation: {} labels for {} rows of logits", labels.size(), rows);
  const size_t relations = task ? task->relations().size() : 0;
  counts.relation_correct.resize(relations, 0);
  const float* x = logits.data();
  for (int64_t i = 0; i < rows; ++i) {
    const int32_t label = labels[static_cast<size_t>(i)];
    if (label == kIgnoreIndex) continue;
    int32_t predicted = 0;
    ew::argmax_rows(x + i * classes, 1, classes, &predicted);
    ++counts.tokens;
    counts.correct += predicted == label;
    for (size_t r = 0; r < relations; ++r)
      counts.relation_correct[r] += task->relation_correct(predicted, label, static_cast<int>(r));
  }
}

EvalCounts batch_counts(const Tensor& logits, std::span<const int32_t> labels, const Task* task,
                        double mean_loss) {
  EvalCounts counts;
  count_predictions(logits, labels, task, counts);
  counts.loss_sum = mean_loss * static_cast<double>(counts.tokens);
  return counts;
}

EvalCounts evaluate_batch(Encoder& model, const Batch& batch, const Task& task,
                          std::vector<Tensor>* weights) {
  std::vector<std::span<const int32_t>> features;
  batch.feature_spans(features);
  EncoderOutput out =
      model.forward(features, batch.batch_size, batch.seq_len, nullptr, weights != nullptr);
  if (weights) {
    weights->clear();
    for (const Var& w : out.weights) weights->push_back(w.value());
  }
  const double mean = cross_entropy(out.logits, batch.labels, kIgnoreIndex).value().item();
  return batch_counts(out.logits.value(), batch.labels, &task, mean);
}

}  // namespace headlab
