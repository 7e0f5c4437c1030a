#pragma once
// Internal to the analysis (analysis.cpp, pruning.cpp, composition.cpp): the evaluation
// sentences generated once, and what is measured on them with the model's gates as set.
// Every function runs under NoGradGuard except gate_gradients; none changes the gates unless it
// says so.

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <vector>

#include "core/tensor.h"
#include "train/analysis/head_gates.h"
#include "train/analysis/head_metrics.h"
#include "train/tasks/task.h"

namespace headlab {

class Encoder;

namespace analysis_detail {

// The evaluation batches, replayed for every gate setting. The counted (non-BOS) tokens of a
// batch are where its label is not kIgnoreIndex.
struct EvalSet {
  std::vector<Batch> batches;
};

// Batches 0..stream.batches-1 of the evaluation stream (a seeded stream or the task's set).
EvalSet make_eval_set(const Task& task, const EvalStream& stream);
// Batches 0..batches-1 of the seeded stream `seed` (generate), whatever the task's set.
EvalSet make_eval_set(const Task& task, uint64_t seed, int64_t batches, int64_t batch_size);

// Argmax over the last dim of logits [B, T, C] -> [B*T] (the examples' predicted labels).
void predict(const Tensor& logits, std::vector<int32_t>& out);

// The set's counts with the current gates: the one evaluation (train/eval/evaluation.h), so
// accuracy and loss are token-weighted as in training's metrics. With `per_batch`, each batch's
// own counts too, in order (the spread of accuracy across batches).
EvalCounts evaluate(Encoder& model, const EvalSet& set, const Task& task,
                    std::vector<EvalCounts>* per_batch = nullptr);
// The same with the hooks' gates, each batch started where the gates allow
// (AnalysisHooks::start_batch): the same counts.
EvalCounts evaluate(AnalysisHooks& hooks, const EvalSet& set, const Task& task);

// Each gate setting's accuracy, evaluated once: the analysis meets some settings more than once
// (a relation group of one head is that head's ablation; with one head in a layer, keeping it
// is the ungated model; the pruning curve ends at a keep-only setting), and evaluation is
// deterministic, so a repeated setting's accuracy is the one already measured.
class GateEvaluations {
 public:
  using Gates = std::vector<std::vector<float>>;
  // Gated-off heads replaced as `ablation` says (head_gates.h).
  GateEvaluations(AnalysisHooks& hooks, const EvalSet& set, const Task& task,
                  Ablation ablation = Ablation::zero)
      : hooks_(hooks), set_(set), task_(task), ablation_(ablation) {}
  // With these gates ([L][H]); a setting not met before is set on the model and evaluated (the
  // gates stay set), a known one leaves the model as it is.
  LabelAccuracy accuracy(const Gates& gates);
  // A setting's accuracy measured elsewhere (the ungated evaluation, a pruning step's passes).
  void record(const Gates& gates, const LabelAccuracy& accuracy) { known_[gates] = accuracy; }

 private:
  AnalysisHooks& hooks_;
  const EvalSet& set_;
  const Task& task_;
  Ablation ablation_;
  std::map<Gates, LabelAccuracy> known_;
};

// Called for every batch k with its attention weights (one [B, H, T, T] per layer), its
// counted tokens (labelled_tokens) and its logits.
using AttentionVisitor =
    std::function<void(size_t k, const Batch& batch, const std::vector<Tensor>& weights,
                       std::span<const uint8_t> counted, const Tensor& logits)>;
// Head metrics over the set with the current gates, the weights read at every layer's
// hook_pattern (attention of gated-off heads is still computed: a gate replaces a head's output,
// not its weights).
HeadMetrics attention_metrics(AnalysisHooks& hooks, const EvalSet& set, int relations,
                              const AttentionVisitor& visit = {});
// Per layer each head's mean output at hook_z over the set's counted tokens, [h * d] (for mean
// ablation), with the current gates; from the kept starts when the hooks keep them for `set`
// (AnalysisHooks::keep_starts, gates at ones).
std::vector<Tensor> head_means(AnalysisHooks& hooks, const EvalSet& set);

// mean over batches of |dL/dg_{l,h}| at the current gates, L the batch's mean token
// cross-entropy; [L * H], layer-major. With `counts`, the same forward passes' predictions are
// counted into it (what evaluate would count with these gates: recording the tape changes no
// value).
// Parameters stop requiring gradients meanwhile; afterwards the gates are back at ones without
// gradients (AnalysisHooks::reset).
std::vector<double> gate_gradients(AnalysisHooks& hooks, const EvalSet& set, const Task& task,
                                   EvalCounts* counts = nullptr);

}  // namespace analysis_detail
}  // namespace headlab
