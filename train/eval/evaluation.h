#pragma once
// One evaluation and one accuracy counter, for every number headlab reports about predictions:
// a training step's loss and accuracy, the trainer's periodic evaluation (metrics.jsonl,
// summary.json, `headlab eval`) and the head analysis (heads.json's accuracy, ablations and
// pruning curve).
//
// A token counts when its label is not kIgnoreIndex (BOS carries none). Its prediction is the
// argmax of its logits (the first maximum; ew::argmax_rows). Every figure is token-weighted over
// everything added, batch by batch in order:
//
//   accuracy      = correct / tokens
//   component r   = relation_correct[r] / tokens      Task::relation_correct(prediction, label, r)
//   loss          = loss_sum / tokens                 loss_sum: each batch's mean cross-entropy
//                                                     over its tokens, times their number
//
// so a batch with more labelled tokens weighs more, and splitting the same tokens into other
// batches changes a figure only by the rounding of its sums.

#include <cstdint>
#include <span>
#include <vector>

#include "core/tensor.h"
#include "train/tasks/task.h"

namespace headlab {

class Encoder;

struct EvalCounts {
  int64_t tokens = 0;                     // counted (labelled) tokens
  int64_t correct = 0;                    // whose prediction is the label
  std::vector<int64_t> relation_correct;  // [R]; empty when relations were not scored
  double loss_sum = 0;                    // sum over batches of mean cross-entropy x tokens

  // Adds another batch's (or rank's) counts after these; relation counts of equal length.
  void add(const EvalCounts& other);

  double accuracy() const { return tokens > 0 ? static_cast<double>(correct) / tokens : 0.0; }
  double loss() const { return tokens > 0 ? loss_sum / static_cast<double>(tokens) : 0.0; }
  // [R]: relation_correct[r] / tokens.
  std::vector<double> relation_accuracy() const;
};

// Counts the predictions of logits [rows, C] (any leading shape) against labels [rows]: tokens
// and correct, and with a task each of its relations' relation_correct. No allocation once
// relation_correct has its size. Throws headlab::Error when labels.size() != rows.
void count_predictions(const Tensor& logits, std::span<const int32_t> labels, const Task* task,
                       EvalCounts& counts);

// The counts of one batch whose cross-entropy, the mean over its counted tokens, is mean_loss:
// count_predictions into fresh counts, and loss_sum = mean_loss x tokens (the one place a
// batch's loss is weighted by its tokens).
EvalCounts batch_counts(const Tensor& logits, std::span<const int32_t> labels, const Task* task,
                        double mean_loss);

// One batch through the model as it is (eval or train mode, gates as set; the caller holds a
// NoGradGuard): its counts with every relation scored and its loss. With `weights`, also each
// layer's attention weights [B, h, T, T] (need_weights).
EvalCounts evaluate_batch(Encoder& model, const Batch& batch, const Task& task,
                          std::vector<Tensor>* weights = nullptr);

}  // namespace headlab
