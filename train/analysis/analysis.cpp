// The analysis driver (analysis.h); the documents it writes are documents.cpp.

#include "train/analysis/analysis.h"

#include <algorithm>
#include <cmath>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "core/error.h"
#include "layers/encoder.h"
#include "train/analysis/eval_set.h"
#include "train/config/config.h"
#include "train/tasks/task.h"

namespace headlab {

using namespace analysis_detail;

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
  const EvalStream stream =
      eval_stream(task, res.batches, res.batch_size, static_cast<uint64_t>(res.seed));
  if (stream.from_set()) {
    res.set_sentences = stream.set_sentences;
    res.batches = options.batches > 0 ? std::min(options.batches, stream.batches) : stream.batches;
  }
  if (options.examples < 0 || options.examples > res.batch_size)
    fail("analyze: examples is {} but must lie in [0, batch size {}]", options.examples,
         res.batch_size);
  return res;
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
void measure_attention(AnalysisHooks& hooks, const Task& task, const EvalSet& set, int64_t examples,
                       AnalysisResult& res) {
  // A set's first batch may hold fewer sentences than the batch size.
  res.examples.examples =
      set.batches.empty() ? 0 : std::min(examples, set.batches.front().batch_size);
  res.examples.layers = res.layers;
  res.examples.heads = res.heads;
  res.examples.seq_len = task.seq_len();
  const int R = static_cast<int>(res.relations.size());
  PathMassAccumulator paths(res.layers, res.heads, R);
  ChanceBaselineAccumulator chance(R);
  // The tasks' batches carry no padding (every key visible); a padded task would pass its key
  // padding mask to both accumulators here.
  const auto visit = [&](size_t k, const Batch& b, const std::vector<Tensor>& weights,
                         std::span<const uint8_t> counted, const Tensor& logits) {
    if (k == 0) keep_examples(task, b, weights, logits, res.examples);
    if (res.layers > 1) paths.add(weights, b.partners, counted);
    chance.add(b.batch_size, b.seq_len, b.partners, counted);
  };
  res.metrics = attention_metrics(hooks, set, R, visit);
  res.paths = paths.finish();
  res.baselines = chance.finish();
  res.best_heads = best_heads(res.metrics.argmax_accuracy, res.baselines);
}

// Each head's metrics, and the accuracy with that head's output replaced (by zero, and by its
// mean output) and with only it kept in its layer.
void ablate_heads(AnalysisHooks& hooks, GateEvaluations& evals, GateEvaluations& mean_evals,
                  AnalysisResult& res) {
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
      const LabelAccuracy off =
          evals.accuracy(gates_without(L, H, std::span<const HeadRef>(&self, 1)));
      a.ablation_accuracy = off.accuracy;
      a.ablation_component = off.component;
      const LabelAccuracy mean_off =
          mean_evals.accuracy(gates_without(L, H, std::span<const HeadRef>(&self, 1)));
      a.mean_ablation_accuracy = mean_off.accuracy;
      a.mean_ablation_component = mean_off.component;
      const LabelAccuracy only = evals.accuracy(gates_keep_only(L, H, self));
      a.keep_only_accuracy = only.accuracy;
      a.keep_only_component = only.component;
    }
  }
  hooks.reset();
}

// Each relation's group of heads gated off together, and the R x R drop in component accuracy.
void ablate_groups(AnalysisHooks& hooks, GateEvaluations& evals, double min_mass,
                   AnalysisResult& res) {
  res.groups = relation_groups(res.metrics.mass, min_mass);
  for (const std::vector<HeadRef>& group : res.groups)
    res.group_ablated.push_back(evals.accuracy(gates_without(res.layers, res.heads, group)));
  res.group_drops = group_ablation_drops(res.eval, res.group_ablated);
  hooks.reset();
}

// Importance: the mean over batches of |dL/dg| at g = 1, L2-normalised within each layer.
void measure_importance(AnalysisHooks& hooks, const Task& task, const EvalSet& set,
                        AnalysisResult& res) {
  const std::vector<double> raw = gate_gradients(hooks, set, task);
  const std::vector<double> normalised = normalise_per_layer(raw, res.layers, res.heads);
  for (size_t k = 0; k < raw.size(); ++k) {
    res.per_head[k].importance_raw = raw[k];
    res.per_head[k].importance = normalised[k];
  }
}

// The pruning curve (pruning.h) by |dL/dg|, starting from the accuracy and importance already
// measured (res.eval, measure_importance); gates back at ones.
std::vector<PruningStep> prune_by_gradient(AnalysisHooks& hooks, const Task& task,
                                           const EvalSet& set, GateEvaluations& evals,
                                           const AnalysisResult& res) {
  using Gates = std::vector<std::vector<float>>;
  GateMeasure unpruned{res.eval, {}};
  for (const HeadAnalysis& h : res.per_head) unpruned.importance.push_back(h.importance_raw);
  const auto measure = [&](const Gates& g, bool importance) {
    if (!importance) return GateMeasure{evals.accuracy(g), {}};
    hooks.set(g);
    EvalCounts counts;
    std::vector<double> raw = gate_gradients(hooks, set, task, &counts);
    const LabelAccuracy acc = label_accuracy(counts);
    evals.record(g, acc);
    return GateMeasure{acc, std::move(raw)};
  };
  std::vector<PruningStep> curve = iterative_pruning(
      static_cast<int>(hooks.layers()), static_cast<int>(hooks.heads()), unpruned, measure);
  hooks.reset();
  return curve;
}

// The pruning curve by mean ablation: with the heads of `g` replaced by their mean outputs, each
// remaining head's importance is the loss with it replaced too, minus the loss without. Needs
// the hooks' means (set_means); gates back at ones, zero ablation.
std::vector<PruningStep> prune_by_mean_ablation(AnalysisHooks& hooks, const Task& task,
                                                const EvalSet& set) {
  using Gates = std::vector<std::vector<float>>;
  const auto measure = [&](const Gates& g, bool importance) {
    hooks.set_ablation(Ablation::mean);
    hooks.set(g);
    const EvalCounts now = evaluate(hooks, set, task);
    GateMeasure out{label_accuracy(now), {}};
    if (!importance) return out;
    for (size_t l = 0; l < g.size(); ++l) {
      for (size_t h = 0; h < g[l].size(); ++h) {
        if (g[l][h] == 0.0f) {
          out.importance.push_back(0.0);  // pruned already: not ranked
          continue;
        }
        Gates without = g;
        without[l][h] = 0.0f;
        hooks.set(without);
        out.importance.push_back(evaluate(hooks, set, task).loss() - now.loss());
      }
    }
    return out;
  };
  const Gates ones(static_cast<size_t>(hooks.layers()),
                   std::vector<float>(static_cast<size_t>(hooks.heads()), 1.0f));
  std::vector<PruningStep> curve =
      iterative_pruning(static_cast<int>(hooks.layers()), static_cast<int>(hooks.heads()),
                        measure(ones, true), measure, /*normalise=*/false);
  hooks.reset();
  return curve;
}

// The pruning curve in the order of the unpruned model's patching: per head the sum over
// relations of |restored| (undefined counts 0), the least first; the pruned heads zeroed.
std::vector<PruningStep> prune_by_patching(AnalysisHooks& hooks, GateEvaluations& evals,
                                           const AnalysisResult& res) {
  using Gates = std::vector<std::vector<float>>;
  const std::vector<double> scores = patching_importance(res.patching, res.layers * res.heads);
  const auto measure = [&](const Gates& g, bool importance) {
    return GateMeasure{evals.accuracy(g), importance ? scores : std::vector<double>{}};
  };
  std::vector<PruningStep> curve =
      iterative_pruning(res.layers, res.heads, GateMeasure{res.eval, scores}, measure,
                        /*normalise=*/false);
  hooks.reset();
  return curve;
}

// Composition (composition.h): the two-step paths measured with the attention, and every head
// below the last layer gated off in turn, the masses measured again.
std::vector<HeadComposition> compose(AnalysisHooks& hooks, const EvalSet& set,
                                     const AnalysisResult& res) {
  if (res.layers < 2) return {};
  std::vector<HeadRelationMatrix> ablated;
  for (int l = 0; l + 1 < res.layers; ++l) {
    for (int h = 0; h < res.heads; ++h) {
      const HeadRef off{l, h};
      hooks.set(gates_without(res.layers, res.heads, std::span<const HeadRef>(&off, 1)));
      ablated.push_back(attention_metrics(hooks, set, static_cast<int>(res.relations.size())).mass);
    }
  }
  hooks.reset();
  return compositions(res.metrics.mass, res.paths, ablated);
}

}  // namespace

AnalysisResult analyze(Encoder& model, const Task& task, const Config& config,
                       const AnalysisOptions& options) {
  AnalysisResult res = start(model, task, config, options);
  res.step = options.step;
  EvalStream stream =
      eval_stream(task, res.batches, res.batch_size, static_cast<uint64_t>(res.seed));
  stream.batches = res.batches;
  const EvalSet set = make_eval_set(task, stream);
  const EvalModeGuard eval_mode(model);
  AnalysisHooks hooks(model);
  if (!set.batches.empty()) hooks.check_points(set.batches.front());
  std::vector<EvalCounts> per_batch;
  const EvalCounts counts = evaluate(model, set, task, &per_batch);
  res.eval = label_accuracy(counts);
  res.eval_spread = accuracy_spread(per_batch);
  res.eval_loss = counts.loss();
  measure_attention(hooks, task, set, options.examples, res);
  if (task.next_token()) res.induction = measure_induction(model, task, stream, res.batches);
  res.specialization = specialization(res.metrics.mass, options.claim_threshold);
  GateEvaluations evals(hooks, set, task);
  evals.record(gates_without(res.layers, res.heads, {}), res.eval);  // all ones
  if (options.start_at_clean_values) hooks.keep_starts(set);
  hooks.set_means(head_means(hooks, set));
  GateEvaluations mean_evals(hooks, set, task, Ablation::mean);
  mean_evals.record(gates_without(res.layers, res.heads, {}), res.eval);
  ablate_heads(hooks, evals, mean_evals, res);
  ablate_groups(hooks, evals, options.group_min_mass, res);
  measure_importance(hooks, task, set, res);
  res.composition = compose(hooks, set, res);
  // The corruptions' own stream: the evaluation seed's sentences drawn again with another key.
  const uint64_t patch_seed =
      static_cast<uint64_t>(res.seed) * 0x9E3779B97F4A7C15ull + 0x7061746368;
  res.patching = activation_patching(hooks, task, set, static_cast<int>(res.relations.size()),
                                     patch_seed, options.start_at_clean_values);
  res.pruning_importance = pruning_importance_from_name(config.train.pruning_importance);
  switch (res.pruning_importance) {
    case PruningImportance::gradient:
      res.pruning = prune_by_gradient(hooks, task, set, evals, res);
      break;
    case PruningImportance::mean_ablation:
      res.pruning = prune_by_mean_ablation(hooks, task, set);
      break;
    case PruningImportance::patching:
      res.pruning = prune_by_patching(hooks, evals, res);
      break;
  }
  return res;
}

}  // namespace headlab
