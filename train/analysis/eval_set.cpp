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

std::vector<std::span<const int32_t>> feature_spans(const Batch& b) {
  std::vector<std::span<const int32_t>> f;
  for (const auto& v : b.features) f.emplace_back(v);
  return f;
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

LabelAccuracy evaluate(Encoder& model, const EvalSet& set, const Task& task, double* loss) {
  NoGradGuard no_grad;
  LabelAccuracyAccumulator acc(task);
  std::vector<int32_t> pred;
  double loss_sum = 0;
  for (const Batch& b : set.batches) {
    const auto f = feature_spans(b);
    EncoderOutput out = model.forward(f, b.batch_size, b.seq_len);
    predict(out.logits.value(), pred);
    acc.add(pred, b.labels);
    if (loss) loss_sum += cross_entropy(out.logits, b.labels, kIgnoreIndex).value().item();
  }
  if (loss) *loss = loss_sum / static_cast<double>(set.batches.size());
  return acc.finish();
}

LabelAccuracy GateEvaluations::accuracy(const Gates& gates) {
  if (const auto it = known_.find(gates); it != known_.end()) return it->second;
  set_gates(model_, gates);
  return known_[gates] = evaluate(model_, set_, task_);
}

HeadMetrics attention_metrics(Encoder& model, const EvalSet& set, int relations,
                              const AttentionVisitor& visit) {
  NoGradGuard no_grad;
  HeadMetricsAccumulator acc(static_cast<int>(model.num_layers()),
                             static_cast<int>(model.options().heads), relations);
  for (size_t k = 0; k < set.batches.size(); ++k) {
    const Batch& b = set.batches[k];
    EncoderOutput out = model.forward(feature_spans(b), b.batch_size, b.seq_len, nullptr, true);
    std::vector<Tensor> weights;
    for (const Var& w : out.weights) weights.push_back(w.value());
    const std::vector<uint8_t> counted = labelled_tokens(b);
    acc.add(weights, b.partners, counted);
    if (visit) visit(k, b, weights, counted, out.logits.value());
  }
  return acc.finish();
}

std::vector<double> gate_gradients(Encoder& model, const EvalSet& set,
                                   LabelAccuracyAccumulator* accuracy) {
  const int64_t L = model.num_layers(), H = model.options().heads;
  std::vector<double> sum(static_cast<size_t>(L * H), 0.0);
  {
    FrozenParameters frozen(model);
    for (int64_t l = 0; l < L; ++l) model.attention(l).set_gate_requires_grad(true);
    std::vector<int32_t> pred;
    for (const Batch& b : set.batches) {
      EncoderOutput out = model.forward(feature_spans(b), b.batch_size, b.seq_len);
      if (accuracy) {
        predict(out.logits.value(), pred);
        accuracy->add(pred, b.labels);
      }
      Var loss = cross_entropy(out.logits, b.labels, kIgnoreIndex);
      if (!loss.requires_grad()) {  // no attention layer: no gradient to measure
        if (accuracy) continue;
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
