#include "train/analysis/analysis.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "core/error.h"
#include "layers/encoder.h"
#include "train/config/config.h"
#include "train/io/files.h"
#include "train/io/npy.h"
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

AnalysisResult analyze(Encoder& model, const Task& task, const Config& config,
                       const AnalysisOptions& options) {
  const int R = static_cast<int>(task.relations().size());
  if (R == 0) fail("analyze: task '{}' has no relations to analyse", task.name());
  const int L = static_cast<int>(model.num_layers());
  const int H = static_cast<int>(model.options().heads);
  if (L != config.model.layers || H != config.model.heads) {
    fail("analyze: the model has {} layers x {} heads but the config says {} x {}", L, H,
         config.model.layers, config.model.heads);
  }
  AnalysisResult res;
  res.relations = task.relations();
  res.layers = L;
  res.heads = H;
  res.batches = options.batches > 0 ? options.batches : config.train.eval_batches;
  res.batch_size = options.batch_size > 0 ? options.batch_size : config.train.eval_batch_size;
  res.seed = options.seed >= 0 ? options.seed : config.train.eval_seed;
  if (options.examples < 0 || options.examples > res.batch_size) {
    fail("analyze: examples is {} but must lie in [0, batch size {}]", options.examples,
         res.batch_size);
  }

  EvalSet set;
  set.batches.resize(static_cast<size_t>(res.batches));
  for (int64_t k = 0; k < res.batches; ++k) {
    task.generate(static_cast<uint64_t>(res.seed), k, res.batch_size, set.batches[k]);
  }
  const int64_t T = task.seq_len();

  const bool was_training = model.is_training();
  model.eval();
  model.reset_head_gates();

  // Baseline: accuracy, loss, attention metrics and the example maps.
  res.eval = evaluate(model, set, task, &res.eval_loss);
  {
    NoGradGuard no_grad;
    HeadMetricsAccumulator acc(L, H, R);
    std::vector<int32_t> pred;
    for (size_t k = 0; k < set.batches.size(); ++k) {
      const Batch& b = set.batches[k];
      const auto f = feature_spans(b);
      EncoderOutput out = model.forward(f, b.batch_size, b.seq_len, nullptr, true);
      std::vector<Tensor> weights;
      for (const Var& w : out.weights) weights.push_back(w.value());
      std::vector<uint8_t> counted(b.labels.size());
      for (size_t q = 0; q < counted.size(); ++q) counted[q] = b.labels[q] != kIgnoreIndex;
      acc.add(weights, b.partners, counted);
      if (k != 0) continue;
      predict(out.logits.value(), pred);
      AttentionExamples& ex = res.examples;
      ex.examples = options.examples;
      ex.layers = L;
      ex.heads = H;
      ex.seq_len = T;
      ex.weights.resize(static_cast<size_t>(ex.examples * L * H * T * T));
      for (int64_t e = 0; e < ex.examples; ++e) {
        for (int l = 0; l < L; ++l) {
          const float* src = weights[l].data() + e * H * T * T;  // [B, H, T, T] -> sentence e
          std::copy_n(src, H * T * T, ex.weights.data() + (e * L + l) * H * T * T);
        }
        std::vector<std::string> tokens;
        std::vector<std::vector<int32_t>> partners(R);
        for (int64_t t = 0; t < T; ++t) {
          tokens.push_back(task.token_string(b.features, e * T + t));
          for (int r = 0; r < R; ++r) partners[r].push_back(b.partners[r][e * T + t]);
        }
        ex.tokens.push_back(std::move(tokens));
        ex.partners.push_back(std::move(partners));
        ex.labels.emplace_back(b.labels.begin() + e * T, b.labels.begin() + (e + 1) * T);
        ex.predicted.emplace_back(pred.begin() + e * T, pred.begin() + (e + 1) * T);
      }
    }
    res.metrics = acc.finish();
  }
  res.specialization = specialization(res.metrics.mass, options.claim_threshold);

  // Per-head ablation and keep-only accuracy.
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

  // Relation-group ablation.
  res.groups = relation_groups(res.metrics.mass, options.group_min_mass);
  for (int r = 0; r < R; ++r) {
    set_gates(model, gates_without(L, H, res.groups[r]));
    res.group_ablated.push_back(evaluate(model, set, task));
  }
  res.group_drops = group_ablation_drops(res.eval, res.group_ablated);
  model.reset_head_gates();

  // Importance: |dL/dg| at g = 1 per batch. Parameters are frozen meanwhile so the backward
  // pass computes only what reaches the gates.
  {
    std::vector<Var> params = model.parameters();
    std::vector<bool> needed;
    for (const Var& p : params) {
      needed.push_back(p.requires_grad());
      p.set_requires_grad(false);
    }
    for (int l = 0; l < L; ++l) model.attention(l).set_gate_requires_grad(true);
    std::vector<double> sum(static_cast<size_t>(L) * H, 0.0);
    for (const Batch& b : set.batches) {
      const auto f = feature_spans(b);
      EncoderOutput out = model.forward(f, b.batch_size, b.seq_len);
      Var loss = cross_entropy(out.logits, b.labels, kIgnoreIndex);
      if (!loss.requires_grad()) break;  // no attention layer: nothing to measure
      loss.backward();
      for (int l = 0; l < L; ++l) {
        const Var& g = model.head_gate(l);
        for (int h = 0; h < H; ++h) {
          if (g.has_grad()) sum[static_cast<size_t>(l) * H + h] += std::abs(g.grad()[h]);
        }
        g.zero_grad();
      }
    }
    model.reset_head_gates();
    for (int l = 0; l < L; ++l) model.head_gate(l).clear_grad();
    for (size_t i = 0; i < params.size(); ++i) params[i].set_requires_grad(needed[i]);
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
  model.train(was_training);
  return res;
}

nlohmann::json analysis_to_json(const AnalysisResult& res) {
  using nlohmann::json;
  const auto by_relation = [&](const std::vector<double>& v) {
    json o = json::object();
    for (size_t r = 0; r < res.relations.size(); ++r) o[res.relations[r]] = v[r];
    return o;
  };
  json layers = json::array();
  for (int l = 0; l < res.layers; ++l) {
    json heads = json::array();
    for (int h = 0; h < res.heads; ++h) {
      const HeadAnalysis& a = res.at(l, h);
      heads.push_back({{"head", h},
                       {"mass", by_relation(a.mass)},
                       {"mass_distinct", by_relation(a.mass_distinct)},
                       {"argmax_accuracy", by_relation(a.argmax_accuracy)},
                       {"entropy", a.entropy},
                       {"confidence", a.confidence},
                       {"ablation_accuracy", a.ablation_accuracy},
                       {"ablation_drop", res.eval.accuracy - a.ablation_accuracy},
                       {"ablation_component_accuracy", by_relation(a.ablation_component)},
                       {"keep_only_accuracy", a.keep_only_accuracy},
                       {"keep_only_component_accuracy", by_relation(a.keep_only_component)},
                       {"importance", a.importance},
                       {"importance_raw", a.importance_raw}});
    }
    layers.push_back({{"layer", l}, {"heads", heads}});
  }
  json assignment = json::object();
  for (size_t r = 0; r < res.relations.size(); ++r) {
    const HeadRef a = res.specialization.assignment[r];
    assignment[res.relations[r]] = a.valid() ? json::array({a.layer, a.head}) : json(nullptr);
  }
  json groups = json::object(), drops = json::object();
  for (size_t r = 0; r < res.relations.size(); ++r) {
    json g = json::array();
    for (const HeadRef& ref : res.groups[r]) g.push_back(json::array({ref.layer, ref.head}));
    groups[res.relations[r]] = g;
    drops[res.relations[r]] = by_relation(res.group_drops[r]);
  }
  return {{"relations", res.relations},
          {"layers", layers},
          {"specialization",
           {{"s_max", res.specialization.s_max},
            {"s_match", res.specialization.s_match},
            {"n_claimed", res.specialization.n_claimed},
            {"assignment", assignment}}},
          {"eval_accuracy", res.eval.accuracy},
          {"eval_loss", res.eval_loss},
          {"eval_component_accuracy", by_relation(res.eval.component)},
          {"relation_groups", groups},
          {"group_ablation_drop", drops},
          {"eval",
           {{"seed", res.seed},
            {"batches", res.batches},
            {"batch_size", res.batch_size},
            {"queries", res.metrics.queries},
            {"distinct_queries", res.metrics.distinct_queries}}}};
}

nlohmann::json examples_to_json(const AnalysisResult& res) {
  using nlohmann::json;
  const AttentionExamples& ex = res.examples;
  json examples = json::array();
  for (int64_t e = 0; e < ex.examples; ++e) {
    json partners = json::object();
    for (size_t r = 0; r < res.relations.size(); ++r)
      partners[res.relations[r]] = ex.partners[e][r];
    examples.push_back({{"tokens", ex.tokens[e]},
                        {"partners", partners},
                        {"labels", ex.labels[e]},
                        {"predicted", ex.predicted[e]}});
  }
  return {{"shape", {ex.examples, ex.layers, ex.heads, ex.seq_len, ex.seq_len}},
          {"axes", {"example", "layer", "head", "query", "key"}},
          {"relations", res.relations},
          {"examples", examples}};
}

void write_analysis(const std::filesystem::path& run_dir, const AnalysisResult& res) {
  // Atomic writes: an interrupted analysis leaves the previous files, never half of one.
  const auto write_json = [](const std::filesystem::path& path, const nlohmann::json& doc) {
    write_file_atomic(path, doc.dump(2) + "\n");
  };
  write_json(run_dir / "heads.json", analysis_to_json(res));
  write_json(run_dir / "attention_tokens.json", examples_to_json(res));
  const AttentionExamples& ex = res.examples;
  write_npy((run_dir / "attention.npy").string(),
            NpyArray{{ex.examples, ex.layers, ex.heads, ex.seq_len, ex.seq_len}, ex.weights});
}


}  // namespace headlab
