// The analysis driver (analysis.h); the documents it writes are documents.cpp.

#include "train/analysis/analysis.h"

#include <algorithm>
#include <cmath>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "core/error.h"
#include "layers/encoder.h"
#include "train/config/config.h"
#include "train/tasks/task.h"

namespace headlab {
namespace {

// The evaluation batches, generated once and replayed for every gate setting. The non-BOS
// mask of a batch is where its label is not kIgnoreIndex.
struct EvalSet {
  std::vector<Batch> batches;
};

std::vector<std::span<const int32_t>> feature_spans(const Batch& b) {
  std::vector<std::span<const int32_t>> f;
  for (const auto& v : b.features) f.emplace_back(v);
  return f;
}

// Argmax over the last dim of logits [B, T, C] -> [B*T].
void predict(const Tensor& logits, std::vector<int32_t>& out) {
  const int64_t C = logits.shape().back(), rows = logits.numel() / C;
  out.resize(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = logits.data() + r * C;
    out[r] = static_cast<int32_t>(std::max_element(row, row + C) - row);
  }
}

void set_gates(Encoder& model, const std::vector<std::vector<float>>& gates) {
  for (size_t l = 0; l < gates.size(); ++l)
    model.attention(static_cast<int64_t>(l)).set_head_mask(gates[l]);
}

// Accuracy (and optionally the loss) of the model with its current gates over the eval set.
LabelAccuracy evaluate(Encoder& model, const EvalSet& set, const Task& task,
                       double* loss = nullptr) {
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

}  // namespace

namespace {

// For the analysis' lifetime: the model in eval mode with its gates at ones; afterwards, however
// the analysis ends, the mode it had, gates at ones without gradients (reset_head_gates).
class EvalModeGuard {
 public:
  explicit EvalModeGuard(Encoder& model) : model_(model), was_training_(model.is_training()) {
    model_.eval();
    model_.reset_head_gates();
  }
  ~EvalModeGuard() {
    model_.reset_head_gates();
    model_.train(was_training_);
  }
  EvalModeGuard(const EvalModeGuard&) = delete;
  EvalModeGuard& operator=(const EvalModeGuard&) = delete;

 private:
  Encoder& model_;
  bool was_training_;
};

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

// The result's sizes and evaluation stream, from the options or else the config; throws when
// the model, the task or the options do not fit.
AnalysisResult start(const Encoder& model, const Task& task, const Config& config,
                     const AnalysisOptions& options) {
  AnalysisResult res;
  res.task = task.name();
  res.relations = task.relations();
  if (res.relations.empty()) fail("analyze: task '{}' has no relations to analyse", task.name());
  res.layers = static_cast<int>(model.num_layers());
  res.heads = static_cast<int>(model.options().heads);
  if (res.layers != config.model.layers || res.heads != config.model.heads)
    fail("analyze: the model has {} layers x {} heads but the config says {} x {}", res.layers,
         res.heads, config.model.layers, config.model.heads);
  res.batches = options.batches > 0 ? options.batches : config.train.eval_batches;
  res.batch_size = options.batch_size > 0 ? options.batch_size : config.train.eval_batch_size;
  res.seed = options.seed >= 0 ? options.seed : config.train.eval_seed;
  if (options.examples < 0 || options.examples > res.batch_size)
    fail("analyze: examples is {} but must lie in [0, batch size {}]", options.examples,
         res.batch_size);
  return res;
}

EvalSet make_eval_set(const Task& task, const AnalysisResult& res) {
  EvalSet set;
  set.batches.resize(static_cast<size_t>(res.batches));
  for (int64_t k = 0; k < res.batches; ++k)
    task.generate(static_cast<uint64_t>(res.seed), k, res.batch_size, set.batches[k]);
  return set;
}

// The first ex.examples sentences of batch `b` into `ex` (whose sizes are set): attention maps
// [E, L, H, T, T], tokens, partners, labels and predictions. weights[l] is layer l's
// [B, H, T, T].
void keep_examples(const Task& task, const Batch& b, const std::vector<Tensor>& weights,
                   const Tensor& logits, AttentionExamples& ex) {
  const int64_t count = ex.examples, L = ex.layers, H = ex.heads, T = ex.seq_len;
  std::vector<int32_t> pred;
  predict(logits, pred);
  ex.weights.resize(static_cast<size_t>(count * L * H * T * T));
  for (int64_t e = 0; e < count; ++e) {
    for (int64_t l = 0; l < L; ++l) {
      const float* src = weights[l].data() + e * H * T * T;  // [B, H, T, T] -> sentence e
      std::copy_n(src, H * T * T, ex.weights.data() + (e * L + l) * H * T * T);
    }
    std::vector<std::string> tokens;
    std::vector<std::vector<int32_t>> partners(b.partners.size());
    for (int64_t t = 0; t < T; ++t) {
      tokens.push_back(task.token_string(b.features, e * T + t));
      for (size_t r = 0; r < partners.size(); ++r) partners[r].push_back(b.partners[r][e * T + t]);
    }
    ex.tokens.push_back(std::move(tokens));
    ex.partners.push_back(std::move(partners));
    ex.labels.emplace_back(b.labels.begin() + e * T, b.labels.begin() + (e + 1) * T);
    ex.predicted.emplace_back(pred.begin() + e * T, pred.begin() + (e + 1) * T);
  }
}

// Attention metrics of the ungated model over the eval set, and the examples of batch 0.
void measure_attention(Encoder& model, const Task& task, const EvalSet& set, int64_t examples,
                       AnalysisResult& res) {
  NoGradGuard no_grad;
  HeadMetricsAccumulator acc(res.layers, res.heads, static_cast<int>(res.relations.size()));
  res.examples.examples = examples;
  res.examples.layers = res.layers;
  res.examples.heads = res.heads;
  res.examples.seq_len = task.seq_len();
  for (size_t k = 0; k < set.batches.size(); ++k) {
    const Batch& b = set.batches[k];
    EncoderOutput out = model.forward(feature_spans(b), b.batch_size, b.seq_len, nullptr, true);
    std::vector<Tensor> weights;
    for (const Var& w : out.weights) weights.push_back(w.value());
    std::vector<uint8_t> counted(b.labels.size());
    for (size_t q = 0; q < counted.size(); ++q) counted[q] = b.labels[q] != kIgnoreIndex;
    acc.add(weights, b.partners, counted);
    if (k == 0) keep_examples(task, b, weights, out.logits.value(), res.examples);
  }
  res.metrics = acc.finish();
}

// Each head's metrics, and the accuracy with that head gated off and with only it kept in its
// layer.
void ablate_heads(Encoder& model, const Task& task, const EvalSet& set, AnalysisResult& res) {
  const int L = res.layers, H = res.heads, R = static_cast<int>(res.relations.size());
  res.per_head.resize(static_cast<size_t>(L) * H);
  for (int l = 0; l < L; ++l) {
    for (int h = 0; h < H; ++h) {
      HeadAnalysis& a = res.per_head[static_cast<size_t>(l) * H + h];
      a.layer = l;
      a.head = h;
      for (int r = 0; r < R; ++r) {
        a.mass.push_back(res.metrics.mass.at(l, h, r));
        a.mass_distinct.push_back(res.metrics.mass_distinct.at(l, h, r));
        a.argmax_accuracy.push_back(res.metrics.argmax_accuracy.at(l, h, r));
      }
      a.entropy = res.metrics.head_entropy(l, h);
      a.confidence = res.metrics.head_confidence(l, h);
      const HeadRef self{l, h};
      set_gates(model, gates_without(L, H, std::span<const HeadRef>(&self, 1)));
      const LabelAccuracy off = evaluate(model, set, task);
      a.ablation_accuracy = off.accuracy;
      a.ablation_component = off.component;
      set_gates(model, gates_keep_only(L, H, self));
      const LabelAccuracy only = evaluate(model, set, task);
      a.keep_only_accuracy = only.accuracy;
      a.keep_only_component = only.component;
    }
  }
}

// Each relation's group of heads gated off together, and the R x R drop in component accuracy.
void ablate_groups(Encoder& model, const Task& task, const EvalSet& set, double min_mass,
                   AnalysisResult& res) {
  res.groups = relation_groups(res.metrics.mass, min_mass);
  for (const std::vector<HeadRef>& group : res.groups) {
    set_gates(model, gates_without(res.layers, res.heads, group));
    res.group_ablated.push_back(evaluate(model, set, task));
  }
  res.group_drops = group_ablation_drops(res.eval, res.group_ablated);
  model.reset_head_gates();
}

// Importance: the mean over batches of |dL/dg| at g = 1, L2-normalised within each layer.
void measure_importance(Encoder& model, const EvalSet& set, AnalysisResult& res) {
  const int L = res.layers, H = res.heads;
  std::vector<double> sum(static_cast<size_t>(L) * H, 0.0);
  {
    FrozenParameters frozen(model);
    for (int l = 0; l < L; ++l) model.attention(l).set_gate_requires_grad(true);
    for (const Batch& b : set.batches) {
      EncoderOutput out = model.forward(feature_spans(b), b.batch_size, b.seq_len);
      Var loss = cross_entropy(out.logits, b.labels, kIgnoreIndex);
      if (!loss.requires_grad()) break;  // no attention layer: nothing to measure
      loss.backward();
      for (int l = 0; l < L; ++l) {
        const Var& g = model.head_gate(l);
        for (int h = 0; h < H; ++h)
          if (g.has_grad()) sum[static_cast<size_t>(l) * H + h] += std::abs(g.grad()[h]);
        g.zero_grad();
      }
    }
    model.reset_head_gates();
  }
  for (int l = 0; l < L; ++l) {
    double norm = 0.0;
    for (int h = 0; h < H; ++h) {
      double& raw = sum[static_cast<size_t>(l) * H + h];
      raw /= static_cast<double>(set.batches.size());
      norm += raw * raw;
    }
    norm = std::sqrt(norm);
    for (int h = 0; h < H; ++h) {
      HeadAnalysis& a = res.per_head[static_cast<size_t>(l) * H + h];
      a.importance_raw = sum[static_cast<size_t>(l) * H + h];
      a.importance = norm > 0 ? a.importance_raw / norm : 0.0;
    }
  }
}

}  // namespace

AnalysisResult analyze(Encoder& model, const Task& task, const Config& config,
                       const AnalysisOptions& options) {
  AnalysisResult res = start(model, task, config, options);
  const EvalSet set = make_eval_set(task, res);
  const EvalModeGuard eval_mode(model);
  res.eval = evaluate(model, set, task, &res.eval_loss);
  measure_attention(model, task, set, options.examples, res);
  res.specialization = specialization(res.metrics.mass, options.claim_threshold);
  ablate_heads(model, task, set, res);
  ablate_groups(model, task, set, options.group_min_mass, res);
  measure_importance(model, set, res);
  return res;
}

}  // namespace headlab
