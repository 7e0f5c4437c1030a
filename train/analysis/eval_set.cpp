// The evaluation machinery the analysis shares (eval_set.h).

#include "train/analysis/eval_set.h"

#include <algorithm>
#include <cmath>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "core/elementwise.h"
#include "layers/encoder.h"

namespace headlab::analysis_detail {
namespace {

// Parameters stop requiring gradients for the guard's lifetime (so a backward pass computes
// only what reaches the gates), then get their flags back.
class FrozenParameters {
 public:
  explicit FrozenParameters(const Encoder& model) : params_(model.parameters()) {
    for (const Var& p : params_) {
      needed_.push_back(p.requires_grad());
      p.set_requires_grad(false);
    }
  }
  ~FrozenParameters() {
    for (size_t i = 0; i < params_.size(); ++i) params_[i].set_requires_grad(needed_[i]);
  }
  FrozenParameters(const FrozenParameters&) = delete;
  FrozenParameters& operator=(const FrozenParameters&) = delete;

 private:
  std::vector<Var> params_;
  std::vector<bool> needed_;
};

}  // namespace

EvalSet make_eval_set(const Task& task, uint64_t seed, int64_t batches, int64_t batch_size) {
  EvalSet set;
  set.batches.resize(static_cast<size_t>(batches));
  for (int64_t k = 0; k < batches; ++k) task.generate(seed, k, batch_size, set.batches[k]);
  return set;
}

void predict(const Tensor& logits, std::vector<int32_t>& out) {
  const int64_t C = logits.shape().back(), rows = logits.numel() / C;
  out.resize(static_cast<size_t>(rows));
  ew::argmax_rows(logits.data(), rows, C, out.data());
}

void set_gates(Encoder& model, const std::vector<std::vector<float>>& gates) {
  for (size_t l = 0; l < gates.size(); ++l)
    model.attention(static_cast<int64_t>(l)).set_head_mask(gates[l]);
}

EvalCounts evaluate(Encoder& model, const EvalSet& set, const Task& task,
                    std::vector<EvalCounts>* per_batch) {
  NoGradGuard no_grad;
  EvalCounts counts;
  if (per_batch) per_batch->clear();
  for (const Batch& b : set.batches) {
    const EvalCounts one = evaluate_batch(model, b, task);
    counts.add(one);
    if (per_batch) per_batch->push_back(one);
  }
  return counts;
}

LabelAccuracy GateEvaluations::accuracy(const Gates& gates) {
  if (const auto it = known_.find(gates); it != known_.end()) return it->second;
  set_gates(model_, gates);
  return known_[gates] = label_accuracy(evaluate(model_, set_, task_));
}

HeadMetrics attention_metrics(Encoder& model, const EvalSet& set, int relations,
                              const AttentionVisitor& visit) {
  NoGradGuard no_grad;
  HeadMetricsAccumulator acc(static_cast<int>(model.num_layers()),
                             static_cast<int>(model.options().heads), relations);
  std::vector<std::span<const int32_t>> features;
  for (size_t k = 0; k < set.batches.size(); ++k) {
    const Batch& b = set.batches[k];
    b.feature_spans(features);
    EncoderOutput out = model.forward(features, b.batch_size, b.seq_len, nullptr, true);
    std::vector<Tensor> weights;
    for (const Var& w : out.weights) weights.push_back(w.value());
    const std::vector<uint8_t> counted = labelled_tokens(b);
    acc.add(weights, b.partners, counted);
    if (visit) visit(k, b, weights, counted, out.logits.value());
  }
  return acc.finish();
}

std::vector<double> gate_gradients(Encoder& model, const EvalSet& set, const Task& task,
                                   EvalCounts* counts) {
  const int64_t L = model.num_layers(), H = model.options().heads;
  std::vector<double> sum(static_cast<size_t>(L * H), 0.0);
  {
    FrozenParameters frozen(model);
    for (int64_t l = 0; l < L; ++l) model.attention(l).set_gate_requires_grad(true);
    std::vector<std::span<const int32_t>> features;
    for (const Batch& b : set.batches) {
      b.feature_spans(features);
      EncoderOutput out = model.forward(features, b.batch_size, b.seq_len);
      Var loss = cross_entropy(out.logits, b.labels, kIgnoreIndex);
      if (counts)
        counts->add(batch_counts(out.logits.value(), b.labels, &task, loss.value().item()));
      if (!loss.requires_grad()) {  // no attention layer: no gradient to measure
        if (counts) continue;
        break;
      }
      loss.backward();
      for (int64_t l = 0; l < L; ++l) {
        const Var& g = model.head_gate(l);
        for (int64_t h = 0; h < H; ++h)
          if (g.has_grad()) sum[static_cast<size_t>(l * H + h)] += std::abs(g.grad()[h]);
        g.zero_grad();
      }
    }
    model.reset_head_gates();
  }
  for (double& v : sum) v /= static_cast<double>(std::max<size_t>(set.batches.size(), 1));
  return sum;
}

}  // namespace headlab::analysis_detail
