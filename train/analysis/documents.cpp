// The analysis' documents: heads.json, attention_tokens.json and attention.npy (analysis.h).

#include <optional>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "train/analysis/analysis.h"
#include "train/io/checksum.h"
#include "train/io/files.h"
#include "train/io/npy.h"

namespace headlab {

namespace {

using nlohmann::json;

// {"PREV": v[0], "HEAD": v[1], ...}
json by_relation(const AnalysisResult& res, const std::vector<double>& v) {
  HEADLAB_ASSERT(v.size() == res.relations.size());
  json o = json::object();
  for (size_t r = 0; r < res.relations.size(); ++r) o[res.relations[r]] = v[r];
  return o;
}

json optional_number(const std::optional<double>& v) {
  return v ? json(*v) : json(nullptr);
}

// {"PREV": restored, ...} for head k (l * H + h); null where undefined or not measured.
json head_patching(const AnalysisResult& res, size_t k) {
  if (!res.patching.available) return nullptr;
  json o = json::object();
  for (size_t r = 0; r < res.relations.size(); ++r)
    o[res.relations[r]] = optional_number(res.patching.heads[r][k]);
  return o;
}

// {"PREV": v[0], ...} of integers.
json by_relation(const AnalysisResult& res, const std::vector<int64_t>& v) {
  json o = json::object();
  for (size_t r = 0; r < res.relations.size(); ++r) o[res.relations[r]] = v[r];
  return o;
}

// The chance baselines of every relation (baselines.h), under the names each head and the
// top-level "baselines" carry: empty when they were not measured (a result built by hand), as in
// a heads.json written before them. ablation_drop_baseline is null with fewer than two batches.
json relation_baselines(const AnalysisResult& res) {
  const ChanceBaselines& c = res.baselines;
  const size_t R = res.relations.size();
  if (c.mass_uniform.size() != R || c.mass_distinct_uniform.size() != R ||
      c.argmax_offset.size() != R || c.argmax_offset_offset.size() != R)
    return json::object();
  const AccuracySpread& s = res.eval_spread;
  return {{"mass_uniform_baseline", by_relation(res, c.mass_uniform)},
          {"mass_distinct_uniform_baseline", by_relation(res, c.mass_distinct_uniform)},
          {"argmax_offset_baseline", by_relation(res, c.argmax_offset)},
          {"argmax_offset_baseline_offset", by_relation(res, c.argmax_offset_offset)},
          {"ablation_drop_baseline", s.defined ? json(s.drop_baseline) : json(nullptr)}};
}

// {"PREV": DLA, ...} for head k; null where not measured (activation_patching.h).
json head_direct(const AnalysisResult& res, size_t k) {
  if (res.patching.direct.empty()) return nullptr;
  json o = json::object();
  for (size_t r = 0; r < res.relations.size(); ++r) o[res.relations[r]] = res.patching.direct[r][k];
  return o;
}

json head_json(const AnalysisResult& res, const HeadAnalysis& a) {
  json out = {
      {"head", a.head},
      {"mass", by_relation(res, a.mass)},
      {"mass_distinct", by_relation(res, a.mass_distinct)},
      {"argmax_accuracy", by_relation(res, a.argmax_accuracy)},
      {"entropy", a.entropy},
      {"confidence", a.confidence},
      {"ablation_accuracy", a.ablation_accuracy},
      {"ablation_drop", res.eval.accuracy - a.ablation_accuracy},
      {"ablation_component_accuracy", by_relation(res, a.ablation_component)},
      {"mean_ablation_accuracy", a.mean_ablation_accuracy},
      {"mean_ablation_drop", res.eval.accuracy - a.mean_ablation_accuracy},
      {"mean_ablation_component_accuracy", by_relation(res, a.mean_ablation_component)},
      {"keep_only_accuracy", a.keep_only_accuracy},
      {"keep_only_component_accuracy", by_relation(res, a.keep_only_component)},
      {"importance", a.importance},
      {"importance_raw", a.importance_raw},
      {"patching_restored", head_patching(res, static_cast<size_t>(a.layer) * res.heads + a.head)},
      {"direct_logit_attribution",
       head_direct(res, static_cast<size_t>(a.layer) * res.heads + a.head)}};
  // The baselines are the same for every head (they know no attention); each head carries them
  // beside its scores so that a reader of one head needs nothing else.
  out.update(relation_baselines(res));
  return out;
}

json head_ref(const HeadRef& h) {
  return h.valid() ? json::array({h.layer, h.head}) : json(nullptr);
}

json specialization_json(const AnalysisResult& res) {
  json assignment = json::object();
  for (size_t r = 0; r < res.relations.size(); ++r) {
    const HeadRef a = res.specialization.assignment[r];
    assignment[res.relations[r]] = head_ref(a);
  }
  return {{"s_max", res.specialization.s_max},
          {"s_match", res.specialization.s_match},
          {"n_claimed", res.specialization.n_claimed},
          {"claim_threshold", res.specialization.claim_threshold},
          {"assignment", assignment}};
}

json pruning_json(const AnalysisResult& res) {
  json curve = json::array();
  for (const PruningStep& p : res.pruning)
    curve.push_back({{"heads_pruned", p.heads_pruned},
                     {"pruned", head_ref(p.pruned)},
                     {"accuracy", p.accuracy.accuracy},
                     {"component_accuracy", by_relation(res, p.accuracy.component)}});
  return curve;
}

json composition_json(const AnalysisResult& res) {
  json out = json::array();
  for (const HeadComposition& c : res.composition) {
    json sources = json::array();
    for (const CompositionSource& s : c.sources)
      sources.push_back({{"layer", s.head.layer},
                         {"head", s.head.head},
                         {"path_mass", s.path_mass},
                         {"path_mass_baseline", s.path_mass_baseline},
                         {"ablated_mass", s.ablated_mass}});
    out.push_back({{"layer", c.head.layer},
                   {"head", c.head.head},
                   {"relation", res.relations[c.relation]},
                   {"composes_with", head_ref(c.composes_with)},
                   {"path_mass", c.path_mass},
                   {"path_mass_baseline", c.path_mass_baseline},
                   {"path_mass_lower_baseline", c.path_mass_lower_baseline},
                   {"claimed", c.claimed},
                   {"mass", c.mass},
                   {"sources", sources}});
  }
  return out;
}

// "patching": null when the task makes no corrupted copies; else per relation the measured
// tokens, the clean and corrupted mean logit differences, every head's restored fraction
// ([layer][head]) and the residual stream's, at the corrupted positions (source) and at the
// measured tokens (destination).
json patching_json(const AnalysisResult& res) {
  const PatchingMap& p = res.patching;
  if (!p.available) return nullptr;
  json relations = json::object();
  for (size_t r = 0; r < res.relations.size(); ++r) {
    json heads = json::array();
    for (int l = 0; l < res.layers; ++l) {
      json row = json::array();
      for (int h = 0; h < res.heads; ++h)
        row.push_back(optional_number(p.heads[r][static_cast<size_t>(l) * res.heads + h]));
      heads.push_back(row);
    }
    json residual = json::array();
    for (const ResidualPatching& rp : p.residual)
      residual.push_back({{"hook", rp.hook},
                          {"source", optional_number(rp.source[r])},
                          {"destination", optional_number(rp.destination[r])}});
    relations[res.relations[r]] = {{"tokens", p.tokens[r]},
                                   {"clean_logit_difference", p.clean[r]},
                                   {"corrupted_logit_difference", p.corrupted[r]},
                                   {"heads", heads},
                                   {"residual", residual}};
  }
  return {{"metric",
           "(LD_patched - LD_corrupted) / (LD_clean - LD_corrupted), LD = logit[clean label] - "
           "logit[corrupted label] at the measured tokens"},
          {"seed", p.seed},
          {"direct_logit_attribution",
           p.direct.empty() ? json("not measured: " + p.direct_unavailable)
                            : json("each head's share of the clean logit difference through W_o "
                                   "and the classifier, the final norm's scale frozen")},
          {"relations", relations}};
}

// The baselines once, at top level: the same figures each head carries, the composition margin,
// the spread of accuracy across batches and the best head per relation (Clark et al. 2019).
void add_baselines(const AnalysisResult& res, json& doc) {
  json baselines = relation_baselines(res);
  if (baselines.empty()) return;
  baselines["composition_margin"] = kCompositionMargin;
  doc["baselines"] = baselines;
  const AccuracySpread& s = res.eval_spread;
  doc["eval_accuracy_spread"] = {
      {"sd", s.defined ? json(s.sd) : json(nullptr)},
      {"standard_error", s.defined ? json(s.standard_error) : json(nullptr)},
      {"batches", s.batches}};
  json best = json::object();
  for (size_t r = 0; r < res.best_heads.size() && r < res.relations.size(); ++r) {
    const BestHead& b = res.best_heads[r];
    best[res.relations[r]] = {{"head", head_ref(b.head)},
                              {"argmax_accuracy", b.argmax_accuracy},
                              {"argmax_offset_baseline", b.offset_baseline},
                              {"argmax_offset_baseline_offset", b.offset},
                              {"margin", b.margin}};
  }
  doc["best_heads"] = best;
}

}  // namespace

json analysis_to_json(const AnalysisResult& res) {
  json layers = json::array();
  for (int l = 0; l < res.layers; ++l) {
    json heads = json::array();
    for (int h = 0; h < res.heads; ++h) heads.push_back(head_json(res, res.at(l, h)));
    layers.push_back({{"layer", l}, {"heads", heads}});
  }
  json groups = json::object(), drops = json::object();
  for (size_t r = 0; r < res.relations.size(); ++r) {
    json g = json::array();
    for (const HeadRef& ref : res.groups[r]) g.push_back(json::array({ref.layer, ref.head}));
    groups[res.relations[r]] = g;
    drops[res.relations[r]] = by_relation(res, res.group_drops[r]);
  }
  json doc = {{"task", res.task},
              {"relations", res.relations},
              {"layers", layers},
              {"specialization", specialization_json(res)},
              {"eval_accuracy", res.eval.accuracy},
              {"eval_loss", res.eval_loss},
              {"eval_component_accuracy", by_relation(res, res.eval.component)},
              {"relation_groups", groups},
              {"group_ablation_drop", drops},
              {"pruning", pruning_json(res)},
              {"pruning_importance", pruning_importance_name(res.pruning_importance)},
              {"composition", composition_json(res)},
              {"patching", patching_json(res)},
              {"eval",
               {{"seed", res.seed},
                {"batches", res.batches},
                {"batch_size", res.batch_size},
                {"set_sentences", res.set_sentences},
                {"queries", res.metrics.queries},
                {"distinct_queries", res.metrics.distinct_queries},
                // Per relation, the queries with a partner for it (its scores' denominator).
                {"relation_queries", res.metrics.relation_queries.size() == res.relations.size()
                                         ? by_relation(res, res.metrics.relation_queries)
                                         : json::object()}}}};
  add_baselines(res, doc);
  if (res.induction) doc["induction"] = induction_json(*res.induction);
  return doc;
}

json examples_to_json(const AnalysisResult& res) {
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

void write_analysis(const std::filesystem::path& dir, const AnalysisResult& res) {
  const AttentionExamples& ex = res.examples;
  const NpyArray attention{{ex.examples, ex.layers, ex.heads, ex.seq_len, ex.seq_len}, ex.weights};
  json heads = analysis_to_json(res), tokens = examples_to_json(res);
  // One set: the id comes from all three files' contents, heads.json records the other two.
  const std::string attention_digest = npy_digest(attention);
  const std::string id = checksum_hex(attention_digest + '\n' + tokens.dump() + '\n' +
                                      heads.dump() + '\n' + std::to_string(res.step));
  tokens["analysis"] = {{"id", id}, {"step", res.step}};
  const std::string tokens_text = tokens.dump(2) + "\n";
  heads["analysis"] = {{"id", id},
                       {"step", res.step},
                       {"files",
                        {{"attention.npy", attention_digest},
                         {"attention_tokens.json", checksum_hex(tokens_text)}}}};
  // Atomic writes, heads.json last: an interrupted analysis leaves whole files, and a heads.json
  // that does not name the others is refused by the report.
  write_npy((dir / "attention.npy").string(), attention);
  write_file_atomic(dir / "attention_tokens.json", tokens_text);
  write_file_atomic(dir / "heads.json", heads.dump(2) + "\n");
}

}  // namespace headlab
