// Specialization over training, pruning and composition on models whose attention is known by
// construction: a hand-built encoder with a head that looks at BOS, a head that looks at each
// word's SEM partner and heads that contribute nothing (timeline masses, pruning order), and
// the pruning and composition bookkeeping on made-up importances and masses.

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "autograd/ops.h"
#include "core/error.h"
#include "layers/encoder.h"
#include "tests/train/analysis_test_util.h"
#include "train/analysis/activation_patching.h"
#include "train/analysis/analysis.h"
#include "train/analysis/composition.h"
#include "train/analysis/eval_set.h"
#include "train/analysis/pruning.h"
#include "train/config/config.h"
#include "train/io/json.h"
#include "train/run/trainer.h"
#include "train/tasks/dependency.h"

using namespace headlab;
using namespace headlab::analysis_test;
using nlohmann::json;

namespace {

using G = DependencyGrammar;
using Gates = std::vector<std::vector<float>>;

// Gates [L][H] into the attention layers' own head gates (MultiHeadAttention::set_head_mask),
// independent of the analysis' edits at hook_z: the reference the analysis is checked against.
void set_model_gates(Encoder& model, const Gates& gates) {
  for (size_t l = 0; l < gates.size(); ++l)
    model.attention(static_cast<int64_t>(l)).set_head_mask(gates[l]);
}

// Post-norm, so attention sees the raw embedding sum: category one-hot in dims 0..16 (BOS =
// 16), colours and positions zero. Four heads of width 16; lr so small that two steps of Adam
// leave every weight within 1e-9 of where it was put.
const std::string kHandBuilt = R"toml(
[model]
d_model = 32
heads = 4
head_dim = 16
d_ff = 32
norm = "post"
[task]
name = "dependency"
[optim]
lr = 1e-12
[schedule]
name = "constant"
warmup_steps = 0
[train]
steps = 2
batch_size = 4
eval_every = 1
eval_batches = 2
eval_batch_size = 32
log_every = 1
checkpoint_every = 0
)toml";

Var parameter(const Encoder& model, const std::string& name) {
  for (const NamedParameter& p : model.named_parameters())
    if (p.name == name) return p.var;
  FAIL("no parameter " << name);
  return {};
}

// Scores of 100 / sqrt(16) = 25 on the target key: weight 1 - 16 e^-25 there.
//   head 0: every query looks at BOS          (q bias on the key's BOS bit)
//   head 1: every word looks at its SEM partner (q = one-hot of sem(category), k = category)
//   heads 2, 3: q = k = 0, uniform; with their W_o columns zero they add nothing
void build_heads(Encoder& model) {
  Tensor cat = parameter(model, "embeddings.0.weight").value();  // [17, 32]
  cat.fill_(0.0f);
  for (int c = 0; c <= G::kBos; ++c) cat.data()[c * 32 + c] = 1.0f;
  parameter(model, "embeddings.1.weight").value().fill_(0.0f);
  parameter(model, "positions.weight").value().fill_(0.0f);
  MultiHeadAttention& attn = model.attention(0);
  // in_proj_weight [192, 32]: rows 0..63 project Q, 64..127 K (in_proj_bias likewise).
  attn.in_proj_weight.value().slice(0, 128).fill_(0.0f);
  attn.in_proj_bias.value().slice(0, 128).fill_(0.0f);
  float* wq = attn.in_proj_weight.value().data();
  float* wk = wq + 64 * 32;
  wk[0 * 32 + G::kBos] = 1.0f;
  attn.in_proj_bias.value().data()[0] = 100.0f;
  for (int c = 0; c < G::kCategories; ++c) {
    wq[(16 + G::sem[c]) * 32 + c] = 100.0f;
    wk[(16 + c) * 32 + c] = 1.0f;
  }
  float* wo = attn.w_o->weight.value().data();  // [32, 64]: columns 32..63 are heads 2, 3
  for (int row = 0; row < 32; ++row)
    for (int col = 32; col < 64; ++col) wo[row * 64 + col] = 0.0f;
}

// Mean over counted queries of [partner_r(i) == target(i)], the mass a one-hot head on
// `target` must have.
double expected_mass(const Config& c, const Task& task, int r, bool sem_head) {
  Batch b;
  int64_t hits = 0, count = 0;
  for (int64_t k = 0; k < c.train.eval_batches; ++k) {
    task.generate(static_cast<uint64_t>(c.train.eval_seed), k, c.train.eval_batch_size, b);
    for (int64_t q = 0; q < b.tokens(); ++q) {
      if (b.labels[q] == kIgnoreIndex) continue;
      const int32_t target = sem_head ? b.partners[2][q] : 0;
      hits += b.partners[r][q] == target;
      ++count;
    }
  }
  return static_cast<double>(hits) / static_cast<double>(count);
}

}  // namespace

TEST_CASE("train: timeline rows hold the masses of a hand-built model at every evaluation") {
  TempDir dir("headlab-timeline");
  const Config config = parse_config(kHandBuilt, "hand.toml");
  Trainer trainer(config, dir.path / "run");
  build_heads(trainer.model());
  trainer.run();
  const std::vector<json> rows = read_jsonl(dir.path / "run" / "timeline.jsonl");
  REQUIRE(rows.size() == 2);
  const Task& task = trainer.task();
  for (int k = 0; k < 2; ++k) {
    const json& row = rows[k];
    CHECK(row["step"] == k + 1);
    REQUIRE(row["mass"].size() == 1);
    REQUIRE(row["mass"][0].size() == 4);
    const json& bos = row["mass"][0][0];
    const json& sem = row["mass"][0][1];
    // Exactly one word in 16 has BOS as PREV (the first) and one as HEAD (VERB); none as SEM.
    CHECK(bos["PREV"].get<double>() == doctest::Approx(1.0 / 16).epsilon(1e-6));
    CHECK(bos["HEAD"].get<double>() == doctest::Approx(1.0 / 16).epsilon(1e-6));
    CHECK(bos["SEM"].get<double>() == doctest::Approx(0.0).epsilon(1e-6));
    CHECK(sem["SEM"].get<double>() == doctest::Approx(1.0).epsilon(1e-6));
    CHECK(sem["PREV"].get<double>() ==
          doctest::Approx(expected_mass(config, task, 0, true)).epsilon(1e-6));
    CHECK(sem["HEAD"].get<double>() == doctest::Approx(0.0).epsilon(1e-6));  // never the head
    for (int h = 2; h < 4; ++h)
      for (const char* r : {"PREV", "HEAD", "SEM"})
        CHECK(row["mass"][0][h][r].get<double>() == doctest::Approx(1.0 / 17).epsilon(1e-6));
    // SEM goes to head 1 (mass 1); PREV or HEAD to head 0 (1/16), the third to a uniform head.
    CHECK(row["assignment"]["SEM"] == json::array({0, 1}));
    CHECK(row["s_match"].get<double>() ==
          doctest::Approx((1.0 + 1.0 / 16 + 1.0 / 17) / 3).epsilon(1e-5));
    CHECK(row["n_claimed"] == 1);
    CHECK(row["component_accuracy"].contains("SEM"));
    CHECK(row["accuracy"].is_number());
  }
  // The trainer's last evaluation and the last row measure the same sentences.
  const json summary = json::parse(slurp(dir.path / "run" / "summary.json"));
  CHECK(rows[1]["accuracy"].get<double>() ==
        doctest::Approx(summary["eval_accuracy"].get<double>()));
  CHECK(summary["eval_seconds"].get<double>() > 0.0);
}

TEST_CASE("train: without train.timeline no timeline.jsonl is written") {
  TempDir dir("headlab-no-timeline");
  const Config config =
      parse_config(kHandBuilt, "hand.toml", std::vector<std::string>{"train.timeline=false"});
  Trainer trainer(config, dir.path / "run");
  trainer.run();
  CHECK_FALSE(fs::exists(dir.path / "run" / "timeline.jsonl"));
  CHECK(fs::exists(dir.path / "run" / "metrics.jsonl"));
}

TEST_CASE("train: pruning a hand-built model removes the heads that add nothing first") {
  TempDir dir("headlab-prune");
  const Config config = parse_config(kHandBuilt, "hand.toml");
  Trainer trainer(config, dir.path / "run");
  build_heads(trainer.model());
  const AnalysisResult r = analyze(trainer.model(), trainer.task(), config);
  REQUIRE(r.pruning.size() == 4);
  CHECK(r.pruning[0].heads_pruned == 0);
  CHECK_FALSE(r.pruning[0].pruned.valid());
  CHECK(r.pruning[0].accuracy.accuracy == doctest::Approx(r.eval.accuracy));
  // Heads 2 and 3 reach the output through zero W_o columns: |dL/dg| = 0, the lowest, and the
  // tie goes to the lower index. Removing them changes nothing.
  CHECK(r.pruning[1].pruned == HeadRef{0, 2});
  CHECK(r.pruning[2].pruned == HeadRef{0, 3});
  CHECK(r.pruning[1].accuracy.accuracy == r.eval.accuracy);
  CHECK(r.pruning[2].accuracy.accuracy == r.eval.accuracy);
  CHECK(r.at(0, 2).importance_raw == 0.0);
  const HeadRef third = r.pruning[3].pruned;
  CHECK((third == HeadRef{0, 0} || third == HeadRef{0, 1}));
  CHECK(r.pruning[3].accuracy.component.size() == 3);
  CHECK(r.composition.empty());  // one layer: nothing to compose with

  const json j = analysis_to_json(r);
  REQUIRE(j["pruning"].size() == 4);
  CHECK(j["pruning"][0]["pruned"].is_null());
  CHECK(j["pruning"][1]["heads_pruned"] == 1);
  CHECK(j["pruning"][1]["pruned"] == json::array({0, 2}));
  CHECK(j["pruning"][3]["component_accuracy"].contains("PREV"));
  CHECK(j["composition"] == json::array());
}

TEST_CASE("train: the pruning curve's accuracies are those of evaluating each gate setting") {
  // The curve takes each step's accuracy from the forward passes that also give the next
  // ranking's gradients; on a random model (predictions move with every gate) they must equal a
  // plain evaluation with the same heads gated off.
  TempDir dir("headlab-prune-eval");
  const Config config = parse_config(kHandBuilt, "hand.toml");
  Trainer trainer(config, dir.path / "run");
  Encoder& model = trainer.model();
  const AnalysisResult r = analyze(model, trainer.task(), config);
  REQUIRE(r.pruning.size() == 4);
  const analysis_detail::EvalSet set =
      analysis_detail::make_eval_set(trainer.task(), static_cast<uint64_t>(config.train.eval_seed),
                                     config.train.eval_batches, config.train.eval_batch_size);
  Gates gates(1, std::vector<float>(4, 1.0f));
  model.eval();
  for (const PruningStep& step : r.pruning) {
    CAPTURE(step.heads_pruned);
    if (step.pruned.valid()) gates[step.pruned.layer][step.pruned.head] = 0.0f;
    set_model_gates(model, gates);  // the layer's own gate, not the analysis' hook_z edit
    const LabelAccuracy plain =
        label_accuracy(analysis_detail::evaluate(model, set, trainer.task()));
    CHECK(step.accuracy.accuracy == plain.accuracy);
    CHECK(step.accuracy.component == plain.component);
  }
  model.reset_head_gates();
}

TEST_CASE("train: the analysis evaluates each gate setting once") {
  TempDir dir("headlab-gate-evals");
  const Config config = parse_config(kHandBuilt, "hand.toml");
  Trainer trainer(config, dir.path / "run");
  Encoder& model = trainer.model();
  model.eval();
  const analysis_detail::EvalSet set = analysis_detail::make_eval_set(
      trainer.task(), static_cast<uint64_t>(config.train.eval_seed), 2, 32);
  analysis_detail::AnalysisHooks hooks(model);
  analysis_detail::GateEvaluations evals(hooks, set, trainer.task());
  const Gates off_0 = gates_without(1, 4, std::vector<HeadRef>{{0, 0}});
  const Gates off_1 = gates_without(1, 4, std::vector<HeadRef>{{0, 1}});
  // A new setting is evaluated with those gates ...
  const LabelAccuracy first = evals.accuracy(off_0);
  hooks.reset();
  set_model_gates(model, off_0);
  CHECK(analysis_detail::evaluate(model, set, trainer.task()).accuracy() == first.accuracy);
  // ... and a known one is answered from what was measured (a recorded value comes back as given).
  const LabelAccuracy made_up{0.125, {0.25, 0.5, 0.75}, 7};
  evals.record(off_1, made_up);
  CHECK(evals.accuracy(off_1).accuracy == 0.125);
  CHECK(evals.accuracy(off_1).count == 7);
  CHECK(evals.accuracy(off_0).accuracy == first.accuracy);
  model.reset_head_gates();
}

TEST_CASE("train: iterative pruning recomputes importance after each removal") {
  // Heads 1 and 2 back each other up: each looks unimportant while the other is there. A
  // ranking computed once would remove both; recomputed, the survivor becomes vital.
  const auto importance = [](const Gates& g) {
    return std::vector<double>{1.0, g[0][2] > 0 ? 0.1 : 2.0, g[0][1] > 0 ? 0.2 : 2.0};
  };
  const auto accuracy = [](const Gates& g) {
    double alive = 0;
    for (float v : g[0]) alive += v;
    return LabelAccuracy{alive / 3, {alive / 3}, 100};
  };
  std::vector<bool> asked;  // whether each measure call asked for importance
  const auto measure = [&](const Gates& g, bool want) {
    asked.push_back(want);
    return GateMeasure{accuracy(g), want ? importance(g) : std::vector<double>{}};
  };
  const Gates ones(1, std::vector<float>(3, 1.0f));
  const std::vector<PruningStep> curve =
      iterative_pruning(1, 3, GateMeasure{accuracy(ones), importance(ones)}, measure);
  REQUIRE(curve.size() == 3);
  // One measure per removal; importance for every one but the last (nothing is ranked after it).
  CHECK(asked == std::vector<bool>{true, false});
  CHECK(curve[0].accuracy.accuracy == doctest::Approx(1.0));
  CHECK(curve[1].pruned == HeadRef{0, 1});
  CHECK(curve[2].pruned == HeadRef{0, 0});  // not head 2, which is now the important one
  CHECK(curve[2].accuracy.accuracy == doctest::Approx(1.0 / 3));

  // Importance is compared after L2 normalisation within each layer (Michel et al.): raw, head
  // (1, 0) at 0.5 would go first; normalised, (0, 0) at 1/sqrt(101) does.
  const std::vector<double> skewed = {1.0, 10.0, 0.5, 0.5};
  const auto flat = [&](const Gates&, bool want) {
    return GateMeasure{LabelAccuracy{1.0, {1.0}, 1}, want ? skewed : std::vector<double>{}};
  };
  const GateMeasure full{LabelAccuracy{1.0, {1.0}, 1}, skewed};
  CHECK(iterative_pruning(2, 2, full, flat)[1].pruned == HeadRef{0, 0});
  CHECK_THROWS_AS(iterative_pruning(1, 3, full, flat), Error);  // 4 importances for 3 heads
  CHECK_THROWS_AS(iterative_pruning(0, 3, full, flat), Error);

  const std::vector<double> raw = {3.0, 4.0, 1.0, 0.0};
  const std::vector<uint8_t> keep = {1, 1, 1, 0};
  const std::vector<double> n = normalise_per_layer(raw, 2, 2, keep);
  CHECK(n == std::vector<double>{0.6, 0.8, 1.0, 0.0});
}

TEST_CASE("train: composition follows two-step paths and records each lower head's ablation") {
  // Two layers of two heads over T = 3 (one sentence): query 2's relation 0 partner is key 0,
  // reached by Y = (1, 0) looking at key 1, where X = (0, 1) had looked at key 0.
  constexpr int64_t T = 3;
  Tensor a0 = Tensor::zeros({1, 2, T, T}), a1 = Tensor::zeros({1, 2, T, T});
  for (int64_t i = 0; i < T; ++i) {
    a0.data()[(0 * T + i) * T + i] = 1.0f;                     // (0, 0): itself
    a0.data()[(1 * T + i) * T + (i == 0 ? 0 : i - 1)] = 1.0f;  // (0, 1): its left neighbour
    a1.data()[(0 * T + i) * T + (i == 0 ? 0 : i - 1)] = 0.5f;  // (1, 0): half on the left
    a1.data()[(0 * T + i) * T + i] += 0.5f;                    //          and half on itself
    a1.data()[(1 * T + i) * T + 0] = 1.0f;                     // (1, 1): BOS
  }
  const std::vector<std::vector<int32_t>> partners = {{-1, 0, 0}, {-1, 0, 1}};
  const std::vector<uint8_t> counted = {0, 1, 1};
  PathMassAccumulator acc(2, 2, 2);
  const std::vector<Tensor> attention = {a0, a1};
  acc.add(attention, partners, counted);
  const PathMass p = acc.finish();
  // Query 1 -> (1, 0): 0.5 on key 0, 0.5 on key 1; query 2 -> 0.5 on 1, 0.5 on 2.
  // Through (0, 1) (left neighbour): query 1 lands on key 0 with weight 1; query 2 on key 0
  // with 0.5 and on key 1 with 0.5. Relation 0's partners are 0, 0: (1 + 0.5) / 2.
  CHECK(p.at({1, 0}, {0, 1}, 0) == doctest::Approx(0.75));
  CHECK(p.at({1, 0}, {0, 0}, 0) == doctest::Approx(0.25));  // through "itself": A_Y alone
  CHECK(p.at({1, 1}, {0, 0}, 0) == doctest::Approx(1.0));   // BOS, then BOS itself
  // Relation 1's partners are 0, 1: query 1 lands on 0 (1), query 2 on 1 (0.5).
  CHECK(p.at({1, 0}, {0, 1}, 1) == doctest::Approx((1.0 + 0.5) / 2));
  CHECK(p.at({0, 0}, {0, 1}, 0) == 0.0);  // not a path: same layer
  CHECK_THROWS_AS(acc.add(std::vector<Tensor>{a0}, partners, counted), Error);

  HeadRelationMatrix base(2, 2, 2);
  base.at(1, 0, 0) = 0.25;
  std::vector<HeadRelationMatrix> ablated(2, base);
  ablated[1].at(1, 0, 0) = 0.05;
  const std::vector<HeadComposition> c = compositions(base, p, ablated);
  REQUIRE(c.size() == 2);
  CHECK(c[0].head == HeadRef{1, 0});
  CHECK(c[0].relation == 0);
  CHECK(c[0].composes_with == HeadRef{0, 1});
  CHECK(c[0].path_mass == doctest::Approx(0.75));
  CHECK(c[0].mass == doctest::Approx(0.25));
  REQUIRE(c[0].sources.size() == 2);
  CHECK(c[0].sources[0].path_mass == doctest::Approx(0.25));
  CHECK(c[0].sources[1].ablated_mass == doctest::Approx(0.05));
  CHECK(c[1].composes_with == HeadRef{0, 0});  // (1, 1) on BOS: the tie goes to the lowest X
  CHECK(compositions(HeadRelationMatrix(1, 2, 2), PathMass{}, {}).empty());
  CHECK_THROWS_AS(compositions(base, p, {base}), Error);
}

TEST_CASE("train: ablation and importance through hook_z equal the layer's own gate's") {
  // The analysis replaces a head's output at hook_z; for MultiHeadAttention that must give what
  // its own gate (set_head_mask, set_gate_requires_grad) gives: the same accuracies and the
  // same |dL/dg|, head by head.
  TempDir dir("headlab-hook-gates");
  const Config config = parse_config(kHandBuilt, "hand.toml");
  Trainer trainer(config, dir.path / "run");
  Encoder& model = trainer.model();
  const AnalysisResult r = analyze(model, trainer.task(), config);
  const analysis_detail::EvalSet set =
      analysis_detail::make_eval_set(trainer.task(), static_cast<uint64_t>(config.train.eval_seed),
                                     config.train.eval_batches, config.train.eval_batch_size);
  model.eval();
  for (int h = 0; h < 4; ++h) {
    CAPTURE(h);
    set_model_gates(model, gates_without(1, 4, std::vector<HeadRef>{{0, h}}));
    const LabelAccuracy off = label_accuracy(analysis_detail::evaluate(model, set, trainer.task()));
    CHECK(r.at(0, h).ablation_accuracy == off.accuracy);
    CHECK(r.at(0, h).ablation_component == off.component);
  }
  model.reset_head_gates();
  // Importance with the layer's gate: mean over batches of |dL/dg|.
  model.attention(0).set_gate_requires_grad(true);
  for (Var& p : model.parameters()) p.set_requires_grad(false);
  std::vector<double> raw(4, 0.0);
  std::vector<std::span<const int32_t>> features;
  for (const Batch& b : set.batches) {
    b.feature_spans(features);
    Var loss = cross_entropy(model.forward(features, b.batch_size, b.seq_len).logits, b.labels);
    loss.backward();
    for (int h = 0; h < 4; ++h) raw[h] += std::abs(model.head_gate(0).grad()[h]);
    model.head_gate(0).zero_grad();
  }
  for (Var& p : model.parameters()) p.set_requires_grad(true);
  model.reset_head_gates();
  for (int h = 0; h < 4; ++h)
    CHECK(r.at(0, h).importance_raw ==
          doctest::Approx(raw[h] / static_cast<double>(set.batches.size())).epsilon(1e-6));
  // Mean ablation replaces the head by a constant: it differs from zero ablation somewhere, and
  // is recorded for every head.
  bool differs = false;
  for (int h = 0; h < 4; ++h) {
    CHECK(r.at(0, h).mean_ablation_component.size() == 3);
    differs = differs || r.at(0, h).mean_ablation_accuracy != r.at(0, h).ablation_accuracy;
  }
  CHECK(differs);
}

TEST_CASE("train: pruning by mean ablation and by patching on a hand-built model") {
  // The hand-built model: head 0 attends BOS from every query, so its output is the same on
  // every token and equals its mean, and it is the same in a clean and a corrupted sentence;
  // heads 2 and 3 write through zero W_o columns; only head 1 (each word's SEM partner) moves
  // with the input. (The classifier is untrained, so whether head 1 helps the loss is chance.)
  for (const char* measure : {"mean_ablation", "patching"}) {
    CAPTURE(measure);
    TempDir dir("headlab-prune-measure");
    const std::vector<std::string> sets = {std::string("train.pruning_importance=") + measure};
    const Config config = parse_config(kHandBuilt, "hand.toml", sets);
    Trainer trainer(config, dir.path / "run");
    build_heads(trainer.model());
    const AnalysisResult r = analyze(trainer.model(), trainer.task(), config);
    CHECK(pruning_importance_name(r.pruning_importance) == measure);
    CHECK(analysis_to_json(r)["pruning_importance"] == measure);
    REQUIRE(r.pruning.size() == 4);
    if (std::string(measure) == "patching") {
      // One ranking for the whole curve: the heads go in ascending order of the unpruned
      // model's summed |restored|.
      const std::vector<double> scores = patching_importance(r.patching, 4);
      for (size_t k = 2; k < r.pruning.size(); ++k) {
        const HeadRef a = r.pruning[k - 1].pruned, b = r.pruning[k].pruned;
        CHECK(scores[a.head] <= scores[b.head]);
      }
      continue;
    }
    // Mean ablation of heads 0, 2 and 3 changes no prediction: every step before head 1 goes
    // keeps the full model's accuracy.
    for (size_t k = 1; k < r.pruning.size() && !(r.pruning[k].pruned == HeadRef{0, 1}); ++k) {
      CAPTURE(k);
      CHECK(r.pruning[k].accuracy.accuracy == doctest::Approx(r.eval.accuracy).epsilon(1e-9));
    }
  }
  // The default stays Michel et al.'s gradient.
  const Config plain = parse_config(kHandBuilt, "hand.toml");
  CHECK(pruning_importance_from_name(plain.train.pruning_importance) ==
        PruningImportance::gradient);
  CHECK_THROWS_AS(pruning_importance_from_name("entropy"), Error);
  CHECK_THROWS_AS(parse_config(kHandBuilt, "hand.toml",
                               std::vector<std::string>{"train.pruning_importance=entropy"}),
                  Error);
}

TEST_CASE("train: patching importance sums |restored| over relations") {
  PatchingMap map;
  CHECK(patching_importance(map, 3) == std::vector<double>{0.0, 0.0, 0.0});  // not measured
  map.available = true;
  map.heads = {{0.5, std::nullopt, -0.25}, {0.25, 0.125, 1.0}};
  CHECK(patching_importance(map, 3) == std::vector<double>{0.75, 0.125, 1.25});
  // A ranking by these scores: the least restoring head goes first, and stays the order.
  const std::vector<double> scores = patching_importance(map, 3);
  const auto fixed = [&](const Gates&, bool want) {
    return GateMeasure{LabelAccuracy{1.0, {1.0}, 1}, want ? scores : std::vector<double>{}};
  };
  const std::vector<PruningStep> curve =
      iterative_pruning(1, 3, GateMeasure{LabelAccuracy{1.0, {1.0}, 1}, scores}, fixed, false);
  CHECK(curve[1].pruned == HeadRef{0, 1});
  CHECK(curve[2].pruned == HeadRef{0, 0});
  CHECK_THROWS_AS(patching_importance(map, 2), Error);
}
