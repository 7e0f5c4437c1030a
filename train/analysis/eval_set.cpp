// The evaluation machinery the analysis shares (eval_set.h).

#include "train/analysis/eval_set.h"

#include <algorithm>
#include <cmath>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "core/elementwise.h"
#include "layers/encoder.h"
#include "layers/hooks.h"

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

EvalSet make_eval_set(const Task& task, const EvalStream& stream) {
  EvalSet set;
  set.batches.resize(static_cast<size_t>(stream.batches));
  for (int64_t k = 0; k < stream.batches; ++k) stream.batch(task, k, set.batches[k]);
  return set;
}

EvalSet make_eval_set(const Task& task, uint64_t seed, int64_t batches, int64_t batch_size) {
  return make_eval_set(task, EvalStream{batches, batch_size, seed, 0});
}

void predict(const Tensor& logits, std::vector<int32_t>& out) {
  const int64_t C = logits.shape().back(), rows = logits.numel() / C;
  out.resize(static_cast<size_t>(rows));
  ew::argmax_rows(logits.data(), rows, C, out.data());
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

EvalCounts evaluate(AnalysisHooks& hooks, const EvalSet& set, const Task& task) {
  NoGradGuard no_grad;
  const StartsCleared cleared(hooks);
  EvalCounts counts;
  for (size_t k = 0; k < set.batches.size(); ++k) {
    hooks.start_batch(set, k);
    counts.add(evaluate_batch(hooks.model(), set.batches[k], task));
  }
  return counts;
}

LabelAccuracy GateEvaluations::accuracy(const Gates& gates) {
  if (const auto it = known_.find(gates); it != known_.end()) return it->second;
  hooks_.set_ablation(ablation_);
  hooks_.set(gates);
  return known_[gates] = label_accuracy(evaluate(hooks_, set_, task_));
}

HeadMetrics attention_metrics(AnalysisHooks& hooks, const EvalSet& set, int relations,
                              const AttentionVisitor& visit) {
  NoGradGuard no_grad;
  Encoder& model = hooks.model();
  const int64_t L = model.num_layers();
  CachedPoints patterns(hooks.hooks(), block_points(L, "attn.hook_pattern"));
  HeadMetricsAccumulator acc(static_cast<int>(L), static_cast<int>(model.options().heads),
                             relations);
  std::vector<std::span<const int32_t>> features;
  for (size_t k = 0; k < set.batches.size(); ++k) {
    const Batch& b = set.batches[k];
    b.feature_spans(features);
    patterns.forget();
    EncoderOutput out = model.forward(features, b.batch_size, b.seq_len);
    const std::vector<Tensor> weights = patterns.values();
    const std::vector<uint8_t> counted = labelled_tokens(b);
    acc.add(weights, b.partners, counted);
    if (visit) visit(k, b, weights, counted, out.logits.value());
  }
  return acc.finish();
}

std::vector<Tensor> head_means(AnalysisHooks& hooks, const EvalSet& set) {
  NoGradGuard no_grad;
  Encoder& model = hooks.model();
  const int64_t L = model.num_layers();
  std::vector<std::vector<double>> sums(static_cast<size_t>(L));
  int64_t tokens = 0;
  std::vector<std::span<const int32_t>> features;
  CachedPoints z_points(hooks.hooks(), block_points(L, "attn.hook_z"));
  for (size_t k = 0; k < set.batches.size(); ++k) {
    const Batch& b = set.batches[k];
    const bool kept = L > 0 && hooks.kept_z(set, k, 0);
    if (!kept) {
      b.feature_spans(features);
      z_points.forget();
      model.forward(features, b.batch_size, b.seq_len);
    }
    const std::vector<uint8_t> counted = labelled_tokens(b);
    for (int64_t l = 0; l < L; ++l) {
      const Tensor& z = kept ? *hooks.kept_z(set, k, l) : z_points[static_cast<size_t>(l)];
      const int64_t width = z.size(2) * z.size(3);  // [B, T, h, d]
      std::vector<double>& sum = sums[static_cast<size_t>(l)];
      sum.resize(static_cast<size_t>(width), 0.0);
      const float* v = z.data();
      for (size_t i = 0; i < counted.size(); ++i)
        if (counted[i])
          for (int64_t c = 0; c < width; ++c) sum[static_cast<size_t>(c)] += v[i * width + c];
    }
    for (uint8_t c : counted) tokens += c;
  }
  std::vector<Tensor> means;
  for (const std::vector<double>& sum : sums) {
    Tensor m = Tensor::zeros({static_cast<int64_t>(sum.size())});
    for (size_t c = 0; c < sum.size(); ++c)
      m.data()[c] = static_cast<float>(sum[c] / static_cast<double>(std::max<int64_t>(tokens, 1)));
    means.push_back(std::move(m));
  }
  return means;
}

std::vector<double> gate_gradients(AnalysisHooks& hooks, const EvalSet& set, const Task& task,
                                   EvalCounts* counts) {
  Encoder& model = hooks.model();
  const int64_t L = model.num_layers(), H = model.options().heads;
  std::vector<double> sum(static_cast<size_t>(L * H), 0.0);
  {
    FrozenParameters frozen(model);
    hooks.set_ablation(Ablation::zero);  // I = |dL/dg| of z' = g z, as Michel et al.
    hooks.require_grad(true);
    std::vector<std::span<const int32_t>> features;
    const StartsCleared cleared(hooks);
    for (size_t k = 0; k < set.batches.size(); ++k) {
      const Batch& b = set.batches[k];
      b.feature_spans(features);
      hooks.start_batch(set, k);
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
        const Var& g = hooks.gate(l);
        for (int64_t h = 0; h < H; ++h)
          if (g.has_grad()) sum[static_cast<size_t>(l * H + h)] += std::abs(g.grad()[h]);
        g.zero_grad();
      }
    }
    hooks.reset();
  }
  for (double& v : sum) v /= static_cast<double>(std::max<size_t>(set.batches.size(), 1));
  return sum;
}

}  // namespace headlab::analysis_detail
