// The analysis driver on a briefly trained model, checked against independent computations:
// the trainer's own evaluation, ablation by zeroing a head's value projection instead of its
// gate, and importance by central differences of the loss in the gate. Then the CLI end to end.

#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "core/error.h"
#include "layers/encoder.h"
#include "tests/train/analysis_test_util.h"
#include "train/analysis/analysis.h"
#include "train/config/config.h"
#include "train/run/trainer.h"
#include "train/tasks/task.h"

using namespace headlab;
using namespace headlab::analysis_test;
using nlohmann::json;

namespace {

const std::string kConfig = R"toml(
[model]
d_model = 32
heads = 4
layers = 2
d_ff = 64
attn_dropout = 0.1
[task]
name = "dependency"
[schedule]
warmup_steps = 5
[train]
steps = 40
batch_size = 16
eval_every = 0
eval_batches = 2
eval_batch_size = 32
log_every = 20
checkpoint_every = 0
)toml";

struct Trained {
  TempDir dir{"headlab-analysis"};
  Config config = parse_config(kConfig, "analysis-test.toml");
  Trainer trainer{config, dir.path / "run"};
  Trained() { trainer.run(); }
};

std::vector<Batch> eval_batches(const Task& task, const Config& c) {
  std::vector<Batch> out(static_cast<size_t>(c.train.eval_batches));
  for (int64_t k = 0; k < c.train.eval_batches; ++k)
    task.generate(static_cast<uint64_t>(c.train.eval_seed), k, c.train.eval_batch_size, out[k]);
  return out;
}

// Accuracy and mean batch loss of the model as it stands, over the batches.
std::pair<double, double> accuracy_and_loss(Encoder& model, const std::vector<Batch>& batches) {
  NoGradGuard no_grad;
  model.eval();
  int64_t correct = 0, count = 0;
  double loss = 0;
  for (const Batch& b : batches) {
    std::vector<std::span<const int32_t>> f;
    for (const auto& v : b.features) f.emplace_back(v);
    EncoderOutput out = model.forward(f, b.batch_size, b.seq_len);
    const Tensor& logits = out.logits.value();
    const int64_t C = logits.shape().back();
    for (int64_t q = 0; q < b.tokens(); ++q) {
      if (b.labels[q] == kIgnoreIndex) continue;
      const float* row = logits.data() + q * C;
      correct += std::max_element(row, row + C) - row == b.labels[q];
      ++count;
    }
    loss += cross_entropy(out.logits, b.labels, kIgnoreIndex).value().item();
  }
  return {static_cast<double>(correct) / count, loss / batches.size()};
}

}  // namespace

TEST_CASE(
    "train: analysis agrees with the trainer's evaluation, value-zeroed ablation and gate finite "
    "differences") {
  Trained t;
  Encoder& model = t.trainer.model();
  const Task& task = t.trainer.task();
  AnalysisOptions options;
  options.examples = 3;
  const AnalysisResult r = analyze(model, task, t.config, options);
  REQUIRE(r.layers == 2);
  REQUIRE(r.heads == 4);
  REQUIRE(r.per_head.size() == 8);
  REQUIRE(r.relations == std::vector<std::string>{"PREV", "HEAD", "SEM"});

  // Same sentences as the trainer's evaluation, and one evaluation: the same numbers, bit for bit.
  const EvalMetrics e = t.trainer.evaluate();
  CHECK(r.eval.accuracy == e.accuracy);
  CHECK(r.eval_loss == e.loss);
  CHECK(r.eval.component == e.relation_accuracy);
  CHECK(r.metrics.queries == 2 * 32 * 16);

  // Gates and parameters are as before the analysis.
  for (int l = 0; l < 2; ++l) {
    CHECK_FALSE(model.head_gate(l).requires_grad());
    for (float g : model.head_gate(l).value().span()) CHECK(g == 1.0f);
  }
  for (const Var& p : model.parameters()) CHECK(p.requires_grad());

  // Importance is L2-normalised per layer.
  for (int l = 0; l < 2; ++l) {
    double ss = 0;
    for (int h = 0; h < 4; ++h) ss += r.at(l, h).importance * r.at(l, h).importance;
    CHECK(std::sqrt(ss) == doctest::Approx(1.0));
  }

  const std::vector<Batch> batches = eval_batches(task, t.config);
  // Chance baselines: T = 17 keys, all visible, one partner per relation -> 1/17; PREV is the
  // offset -1 head, right on every query.
  for (int rel = 0; rel < 3; ++rel)
    CHECK(r.baselines.mass_uniform[rel] == doctest::Approx(1.0 / 17));
  CHECK(r.baselines.argmax_offset[0] == doctest::Approx(1.0));
  CHECK(r.baselines.argmax_offset_offset[0] == -1);
  CHECK(r.baselines.queries == r.metrics.queries);
  // The spread of accuracy over the two batches, each evaluated on its own.
  const double acc0 = accuracy_and_loss(model, {batches[0]}).first;
  const double acc1 = accuracy_and_loss(model, {batches[1]}).first;
  REQUIRE(r.eval_spread.defined);
  CHECK(r.eval_spread.batches == 2);
  CHECK(r.eval_spread.sd == doctest::Approx(std::abs(acc0 - acc1) / std::sqrt(2.0)));
  CHECK(r.eval_spread.drop_baseline == doctest::Approx(2 * r.eval_spread.sd / std::sqrt(2.0)));
  REQUIRE(r.best_heads.size() == 3);
  for (int rel = 0; rel < 3; ++rel) {
    const BestHead& b = r.best_heads[rel];
    for (const HeadAnalysis& a : r.per_head) CHECK(a.argmax_accuracy[rel] <= b.argmax_accuracy);
    CHECK(b.margin == doctest::Approx(b.argmax_accuracy - r.baselines.argmax_offset[rel]));
  }
  REQUIRE(r.composition.size() == 4);
  for (const HeadComposition& c : r.composition) {
    CHECK(c.path_mass_baseline == r.paths.baseline(c.composes_with, c.relation));
    CHECK(c.claimed == (c.path_mass > c.path_mass_baseline + kCompositionMargin));
  }
  // heads.json carries them beside each head's scores and once at top level.
  const json doc = analysis_to_json(r);
  const json& head = doc["layers"][1]["heads"][2];
  CHECK(head["mass_uniform_baseline"]["HEAD"].get<double>() == doctest::Approx(1.0 / 17));
  CHECK(head["argmax_offset_baseline"]["PREV"].get<double>() == doctest::Approx(1.0));
  CHECK(head["argmax_offset_baseline_offset"]["PREV"] == -1);
  CHECK(head.contains("mass_distinct_uniform_baseline"));
  CHECK(head["ablation_drop_baseline"].get<double>() == r.eval_spread.drop_baseline);
  CHECK(doc["baselines"]["mass_uniform_baseline"] == head["mass_uniform_baseline"]);
  CHECK(doc["baselines"]["composition_margin"] == kCompositionMargin);
  CHECK(doc["eval_accuracy_spread"]["batches"] == 2);
  CHECK(doc["best_heads"]["PREV"]["margin"].get<double>() == r.best_heads[0].margin);
  CHECK(doc["composition"][0]["claimed"] == r.composition[0].claimed);
  CHECK(doc["composition"][0]["sources"][0].contains("path_mass_baseline"));

  const int64_t d = 32 / 4;
  SUBCASE("ablation equals zeroing the head's value projection") {
    // Head h's output is A_h (x W_v,h^T + b_v,h); zeroing that block of the V rows of
    // in_proj_weight (rows 64..95 of [96, 32]) removes it exactly as gate 0 does.
    auto v_rows = [](MultiHeadAttention& attn) {
      return std::pair{attn.in_proj_weight.value().slice(64, 96),
                       attn.in_proj_bias.value().slice(64, 96)};
    };
    for (const HeadRef ref : {HeadRef{0, 1}, HeadRef{1, 3}}) {
      auto [wv, bv] = v_rows(model.attention(ref.layer));
      const Tensor w = wv.clone(), b = bv.clone();
      std::fill(wv.data() + ref.head * d * 32, wv.data() + (ref.head + 1) * d * 32, 0.0f);
      std::fill(bv.data() + ref.head * d, bv.data() + (ref.head + 1) * d, 0.0f);
      CHECK(accuracy_and_loss(model, batches).first ==
            doctest::Approx(r.at(ref.layer, ref.head).ablation_accuracy));
      wv.copy_(w);
      bv.copy_(b);
    }
    // Keep-only: every other head of the layer zeroed.
    auto [wv, bv] = v_rows(model.attention(1));
    const Tensor w = wv.clone(), b = bv.clone();
    for (int h = 0; h < 4; ++h) {
      if (h == 2) continue;
      std::fill(wv.data() + h * d * 32, wv.data() + (h + 1) * d * 32, 0.0f);
      std::fill(bv.data() + h * d, bv.data() + (h + 1) * d, 0.0f);
    }
    CHECK(accuracy_and_loss(model, batches).first ==
          doctest::Approx(r.at(1, 2).keep_only_accuracy));
    wv.copy_(w);
    bv.copy_(b);
  }

  SUBCASE("importance equals mean |dL/dg| by central differences") {
    const float eps = 1e-2f;
    for (const HeadRef ref : {HeadRef{0, 0}, HeadRef{1, 2}}) {
      double mean_abs = 0;
      for (const Batch& b : batches) {
        const std::vector<Batch> one = {b};
        std::vector<float> gate(4, 1.0f);
        gate[ref.head] = 1.0f + eps;
        model.attention(ref.layer).set_head_mask(gate);
        const double up = accuracy_and_loss(model, one).second;
        gate[ref.head] = 1.0f - eps;
        model.attention(ref.layer).set_head_mask(gate);
        const double down = accuracy_and_loss(model, one).second;
        mean_abs += std::abs(up - down) / (2 * eps) / batches.size();
      }
      model.reset_head_gates();
      CHECK(r.at(ref.layer, ref.head).importance_raw ==
            doctest::Approx(mean_abs).epsilon(0.02).scale(1e-3));
    }
  }

  SUBCASE("examples hold the first sentences of eval batch 0 with their partners") {
    const AttentionExamples& ex = r.examples;
    CHECK(ex.examples == 3);
    CHECK(ex.weights.size() == static_cast<size_t>(3 * 2 * 4 * 17 * 17));
    for (size_t row = 0; row < ex.weights.size() / 17; ++row) {
      double s = 0;
      for (int j = 0; j < 17; ++j) s += ex.weights[row * 17 + j];
      CHECK(s == doctest::Approx(1.0).epsilon(1e-4));
    }
    for (int64_t e = 0; e < 3; ++e) {
      CHECK(ex.tokens[e][0] == "BOS");
      for (int rel = 0; rel < 3; ++rel)
        for (int64_t i = 0; i < 17; ++i)
          CHECK(ex.partners[e][rel][i] == batches[0].partners[rel][e * 17 + i]);
      CHECK(ex.labels[e][5] == batches[0].labels[e * 17 + 5]);
    }
    // PREV's partner of token i is i - 1, so the first word's PREV points at BOS.
    CHECK(ex.partners[0][0][1] == 0);
  }
}

namespace {

// Behaves like `inner` until it has scored `score_limit` predictions (or, with throw_on_tokens,
// at its first token_string), then throws: an error midway through an analysis, once with
// heads gated off, once while the examples are kept.
class FailingTask : public Task {
 public:
  FailingTask(const Task& inner, int64_t score_limit, bool throw_on_tokens)
      : inner_(inner), limit_(score_limit), throw_on_tokens_(throw_on_tokens) {}
  std::string name() const override { return inner_.name(); }
  int64_t seq_len() const override { return inner_.seq_len(); }
  int64_t num_classes() const override { return inner_.num_classes(); }
  const std::vector<FeatureSpec>& features() const override { return inner_.features(); }
  const std::vector<std::string>& relations() const override { return inner_.relations(); }
  void generate_sentences(uint64_t seed, int64_t index, int64_t first, int64_t count,
                          Batch& out) const override {
    inner_.generate_sentences(seed, index, first, count, out);
  }
  bool relation_correct(int32_t predicted, int32_t gold, int relation) const override {
    if (++scored_ > limit_) throw Error("failing task: scored too often");
    return inner_.relation_correct(predicted, gold, relation);
  }
  std::string token_string(const std::vector<std::vector<int32_t>>& features,
                           int64_t index) const override {
    if (throw_on_tokens_) throw Error("failing task: no tokens");
    return inner_.token_string(features, index);
  }
  int64_t scored() const { return scored_; }

 private:
  const Task& inner_;
  int64_t limit_;
  bool throw_on_tokens_;
  mutable int64_t scored_ = 0;
};

// Train mode, every gate at one without a gradient, every parameter requiring one.
void check_restored(Encoder& model) {
  CHECK(model.is_training());
  for (int64_t l = 0; l < model.num_layers(); ++l) {
    const Var& g = model.head_gate(l);
    for (int64_t h = 0; h < g.numel(); ++h) CHECK(g.value()[h] == 1.0f);
    CHECK_FALSE(g.requires_grad());
    CHECK_FALSE(g.has_grad());
  }
  for (const Var& p : model.parameters()) CHECK(p.requires_grad());
}

}  // namespace

TEST_CASE("train: analyze restores train mode and the gates when it fails midway") {
  Trained t;
  Encoder& model = t.trainer.model();
  REQUIRE(model.is_training());
  const json before = analysis_to_json(analyze(model, t.trainer.task(), t.config));
  check_restored(model);
  // The ungated evaluation scores every counted token once per relation; failing after one
  // and a half times that throws during the first head's ablation, with that head gated off.
  const int64_t per_pass = t.config.train.eval_batches * t.config.train.eval_batch_size *
                           (t.trainer.task().seq_len() - 1) * 3;
  const FailingTask in_ablation(t.trainer.task(), per_pass * 3 / 2, false);
  CHECK_THROWS_WITH_AS(analyze(model, in_ablation, t.config), "failing task: scored too often",
                       Error);
  CHECK(in_ablation.scored() > per_pass);
  check_restored(model);
  const FailingTask in_examples(t.trainer.task(), per_pass * 100, true);
  CHECK_THROWS_WITH_AS(analyze(model, in_examples, t.config), "failing task: no tokens", Error);
  check_restored(model);
  // Nothing of the failed runs lingers: the analysis gives the same document again.
  CHECK(analysis_to_json(analyze(model, t.trainer.task(), t.config)) == before);
  // The mode it had is what it gets back.
  model.eval();
  analyze(model, t.trainer.task(), t.config);
  CHECK_FALSE(model.is_training());
  model.train();
}

TEST_CASE("train: analyze rejects a model that does not match the config") {
  Trained t;
  Config other = t.config;
  other.model.heads = 8;
  CHECK_THROWS_WITH_AS(analyze(t.trainer.model(), t.trainer.task(), other),
                       doctest::Contains("heads"), Error);
  AnalysisOptions too_many;
  too_many.examples = 1000;
  CHECK_THROWS_AS(analyze(t.trainer.model(), t.trainer.task(), t.config, too_many), Error);
}

TEST_CASE(
    "train: headlab train writes heads.json and report.html, and headlab analyze reproduces them") {
  TempDir dir("headlab-cli-analyze");
  const std::string cli = HEADLAB_CLI;
  const std::string run = (dir.path / "run").string();
  const CommandResult train =
      run_command(cli + " train " + HEADLAB_SOURCE_DIR "/configs/tiny.toml --out " + run +
                  " --no-progress 2>/dev/null");
  REQUIRE(train.code == 0);
  for (const char* f : {"heads.json", "attention.npy", "attention_tokens.json", "report.html"})
    CHECK(fs::exists(dir.path / "run" / f));
  const json first = json::parse(slurp(dir.path / "run" / "heads.json"));
  CHECK(first["layers"][0]["heads"].size() == 4);
  CHECK(first["specialization"]["n_claimed"].is_number_integer());

  // The analysis from the saved checkpoint equals the one done at the end of training.
  fs::remove(dir.path / "run" / "heads.json");
  const CommandResult analyze = run_command(cli + " analyze " + run + " 2>&1");
  CHECK(analyze.code == 0);
  CHECK(analyze.output.find("s_match") != std::string::npos);
  CHECK(json::parse(slurp(dir.path / "run" / "heads.json")) == first);

  // A user's mistake: exit 2 and one line.
  const CommandResult bad = run_command(cli + " analyze " + (dir.path / "nope").string() + " 2>&1");
  CHECK(bad.code == 2);
  CHECK(bad.output.rfind("headlab: error: ", 0) == 0);
  CHECK(std::count(bad.output.begin(), bad.output.end(), '\n') == 1);
  fs::create_directories(dir.path / "empty");
  const CommandResult not_run =
      run_command(cli + " analyze " + (dir.path / "empty").string() + " 2>&1");
  CHECK(not_run.code == 2);
  CHECK(not_run.output.find("is not a run directory of headlab (it has no .headlab)") !=
        std::string::npos);
}
