#pragma once
// The run's evaluation: what metrics.jsonl's evaluation rows, summary.json and `headlab eval`
// report. train.eval_batches batches of train.eval_batch_size sentences from train.eval_seed
// (the same sentences every time), or a task's evaluation set in order (the conllu task's eval
// file: EvalStream, train/tasks/task.h), through the model in eval mode without gradients, counted by
// the one evaluation (train/eval/evaluation.h: token-weighted loss, accuracy and component
// accuracies).
//
// Batches are split over the ranks: the timeline's weighed batches on rank 0, the others round
// robin; their counts are gathered and summed in batch order, so every rank and every process
// count gets the same numbers.

#include <cstdint>
#include <string>

#include "train/run/metrics.h"

namespace headlab {

class Comm;
class HeadMetricsAccumulator;
class Module;
class RunModel;

// At the model's current parameters, on every rank of `comm` together (null: this process
// alone). With `heads`, the first train.timeline_batches batches (0: all) also give their
// attention weights against the gold partners into it (filled on rank 0, which evaluates
// them; every rank must pass one so that all agree on the split). `step` is the row's step.
// Leaves the model in train mode.
EvalMetrics evaluate(RunModel& model, int64_t step, Comm* comm = nullptr,
                     HeadMetricsAccumulator* heads = nullptr);

// Throws NonFiniteError (train/run/step.h; the CLI exits 3, as for training) when the loss or an
// accuracy of `e` is NaN or Inf: a finite but exploded checkpoint (|w| ~ 1e26) gives loss inf.
// The message names `what` (the checkpoint and its step) and the largest |w| of the model, and
// ends with `hint` (what to do).
void check_finite(const EvalMetrics& e, const Module& model, const std::string& what,
                  const std::string& hint = "evaluate an earlier checkpoint with --checkpoint");

}  // namespace headlab
