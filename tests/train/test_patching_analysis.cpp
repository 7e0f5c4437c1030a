// Activation patching and direct logit attribution through the hook points, on models whose
// answers are known: the residual stream's identities hold for any model, a head whose W_o is
// zero restores nothing and is attributed nothing, and the one live head restores everything;
// the attribution equals a reference computed here from the cached activations.

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "core/error.h"
#include "layers/encoder.h"
#include "layers/hooks.h"
#include "layers/layer_norm.h"
#include "tests/train/analysis_test_util.h"
#include "train/analysis/activation_patching.h"
#include "train/analysis/analysis.h"
#include "train/analysis/eval_set.h"
#include "train/analysis/head_gates.h"
#include "train/config/config.h"
#include "train/run/trainer.h"

using namespace headlab;
using namespace headlab::analysis_test;

namespace {

// Untrained, pre-norm, one layer of four heads: every prediction moves with every input.
const std::string kTiny = R"toml(
[model]
d_model = 16
heads = 4
layers = 1
d_ff = 32
[task]
name = "dependency"
[schedule]
name = "constant"
warmup_steps = 0
[train]
steps = 1
batch_size = 4
eval_batches = 2
eval_batch_size = 16
)toml";

// Zeroes the columns of W_o that read head h's output, in every layer.
void silence_head(Encoder& model, int64_t h) {
  for (int64_t l = 0; l < model.num_layers(); ++l) {
    Tensor& w = model.attention(l).w_o->weight.value();  // [D, H d]
    const int64_t D = w.size(0), Hd = w.size(1), d = Hd / model.options().heads;
    for (int64_t k = 0; k < D; ++k)
      for (int64_t j = 0; j < d; ++j) w[k * Hd + h * d + j] = 0.0f;
  }
}

}  // namespace

TEST_CASE("train: patching the residual stream restores all or nothing, as it must") {
  TempDir dir("headlab-patching-residual");
  const Config config =
      parse_config(kTiny, "tiny.toml", std::vector<std::string>{"model.layers=2"});
  Trainer trainer(config, dir.path / "run");
  Encoder& model = trainer.model();
  model.eval();
  const analysis_detail::EvalSet set = analysis_detail::make_eval_set(trainer.task(), 7, 2, 16);
  analysis_detail::AnalysisHooks hooks(model);
  const PatchingMap map = analysis_detail::activation_patching(hooks, trainer.task(), set, 3, 99);
  REQUIRE(map.available);
  REQUIRE(map.residual.size() == 3);  // blocks.0 and blocks.1's inputs, blocks.1's output
  CHECK(map.residual[0].hook == "blocks.0.hook_resid_pre");
  CHECK(map.residual[2].hook == "blocks.1.hook_resid_post");
  for (int r = 0; r < 3; ++r) {
    CAPTURE(r);
    CHECK(map.tokens[static_cast<size_t>(r)] >= 32);  // every sentence has a measured token
    // The corrupted input put back is the clean sentence: everything restored. The measured
    // tokens' own inputs did not change: nothing.
    REQUIRE(map.residual[0].source[r]);
    CHECK(*map.residual[0].source[r] == doctest::Approx(1.0));
    CHECK(*map.residual[0].destination[r] == doctest::Approx(0.0));
    // At the output the logits of a token are its own: the measured tokens' clean output
    // restores everything, the corrupted positions' nothing.
    CHECK(*map.residual[2].destination[r] == doctest::Approx(1.0));
    CHECK(*map.residual[2].source[r] == doctest::Approx(0.0));
  }
  CHECK(model.attached_hooks() == &hooks.hooks());
}

TEST_CASE("train: the one head that reaches the output restores everything, the silent ones 0") {
  TempDir dir("headlab-patching-heads");
  const Config config = parse_config(kTiny, "tiny.toml");
  Trainer trainer(config, dir.path / "run");
  Encoder& model = trainer.model();
  for (int64_t h = 1; h < 4; ++h) silence_head(model, h);
  // The analysis end to end: its patching map and attribution in the result.
  const AnalysisResult res = analyze(model, trainer.task(), config);
  REQUIRE(res.patching.available);
  REQUIRE(res.patching.direct.size() == 3);
  for (int r = 0; r < 3; ++r) {
    CAPTURE(r);
    // One layer: head 0's output is the only way from the corrupted word to another token.
    REQUIRE(res.patching.heads[r][0]);
    CHECK(*res.patching.heads[r][0] == doctest::Approx(1.0));
    for (int h = 1; h < 4; ++h) {
      CHECK(*res.patching.heads[r][h] == doctest::Approx(0.0));
      CHECK(res.patching.direct[r][h] == 0.0);
    }
    CHECK(res.patching.direct[r][0] != 0.0);
  }
  // heads.json carries both per head.
  const nlohmann::json j = analysis_to_json(res);
  CHECK(j["layers"][0]["heads"][0]["patching_restored"]["PREV"].get<double>() ==
        doctest::Approx(1.0));
  CHECK(j["layers"][0]["heads"][2]["direct_logit_attribution"]["SEM"].get<double>() == 0.0);
  CHECK(j["patching"]["relations"]["HEAD"]["tokens"].get<int64_t>() > 0);
}

TEST_CASE("train: direct logit attribution equals the reference from the cached activations") {
  TempDir dir("headlab-patching-dla");
  const Config config = parse_config(kTiny, "tiny.toml");
  Trainer trainer(config, dir.path / "run");
  Encoder& model = trainer.model();
  model.eval();
  const Task& task = trainer.task();
  const analysis_detail::EvalSet set = analysis_detail::make_eval_set(task, 11, 2, 16);
  const uint64_t seed = 5;
  PatchingMap map;
  {
    analysis_detail::AnalysisHooks hooks(model);
    map = analysis_detail::activation_patching(hooks, task, set, 3, seed);
  }
  REQUIRE(map.direct.size() == 3);
  // The reference: the final norm's input x and every head's output c_h = W_o[:, h] z_h from a
  // cache, then (c_h - mean c_h) . gain (W_c[y] - W_c[y']) / sigma(x), in double precision.
  const LayerNorm* norm = nullptr;
  const Linear* classifier = nullptr;
  for (const auto& [name, child] : model.named_children()) {
    if (name == "final_norm") norm = dynamic_cast<const LayerNorm*>(child);
    if (name == "classifier") classifier = dynamic_cast<const Linear*>(child);
  }
  REQUIRE(norm);
  REQUIRE(classifier);
  const Tensor& wo = model.attention(0).w_o->weight.value();
  const Tensor& wc = classifier->weight.value();
  const Tensor& gain = norm->weight.value();
  const int64_t D = 16, H = 4, d = 4;
  for (int r = 0; r < 3; ++r) {
    std::vector<double> sum(H, 0.0);
    int64_t tokens = 0;
    for (const Batch& clean : set.batches) {
      Batch corrupted;
      std::vector<uint8_t> measured;
      REQUIRE(task.corrupt(clean, r, seed, corrupted, measured));
      Hooks hooks;
      hooks.cache("blocks.0.attn.hook_z");
      hooks.cache("blocks.0.hook_resid_post");
      HookGuard attached(model, hooks);
      NoGradGuard no_grad;
      std::vector<std::span<const int32_t>> features;
      clean.feature_spans(features);
      model.forward(features, clean.batch_size, clean.seq_len);
      const Tensor& z = hooks.cached("blocks.0.attn.hook_z").value();
      const Tensor& x = hooks.cached("blocks.0.hook_resid_post").value();
      for (int64_t i = 0; i < clean.tokens(); ++i) {
        if (!measured[static_cast<size_t>(i)]) continue;
        ++tokens;
        double mean = 0, var = 0;
        for (int64_t k = 0; k < D; ++k) mean += x[i * D + k] / double(D);
        for (int64_t k = 0; k < D; ++k) var += std::pow(x[i * D + k] - mean, 2) / double(D);
        const double sigma = std::sqrt(var + 1e-5);
        for (int64_t h = 0; h < H; ++h) {
          std::vector<double> c(D, 0.0);
          double c_mean = 0;
          for (int64_t k = 0; k < D; ++k) {
            for (int64_t j = 0; j < d; ++j)
              c[k] += wo[k * H * d + h * d + j] * z[(i * H + h) * d + j];
            c_mean += c[k] / double(D);
          }
          for (int64_t k = 0; k < D; ++k)
            sum[h] += (c[k] - c_mean) * gain[k] *
                      (wc[clean.labels[i] * D + k] - wc[corrupted.labels[i] * D + k]) / sigma;
        }
      }
    }
    for (int64_t h = 0; h < H; ++h) {
      CAPTURE(r);
      CAPTURE(h);
      CHECK(map.direct[r][h] == doctest::Approx(sum[h] / double(tokens)).epsilon(1e-6));
    }
  }
}

TEST_CASE("train: a post-norm model gets no attribution, and says why") {
  TempDir dir("headlab-patching-post");
  const Config config =
      parse_config(kTiny, "tiny.toml", std::vector<std::string>{"model.norm=\"post\""});
  Trainer trainer(config, dir.path / "run");
  const AnalysisResult res = analyze(trainer.model(), trainer.task(), config);
  CHECK(res.patching.available);
  CHECK(res.patching.direct.empty());
  CHECK(res.patching.direct_unavailable.find("post-norm") != std::string::npos);
  CHECK(analysis_to_json(res)["layers"][0]["heads"][0]["direct_logit_attribution"].is_null());
}

TEST_CASE(
    "train: the analysis started at the clean run's values equals whole forwards bit for "
    "bit, and its gated forwards skip what the gates do not change") {
  TempDir dir("headlab-analysis-starts");
  const Config config =
      parse_config(kTiny, "tiny.toml", std::vector<std::string>{"model.layers=2", "model.heads=2"});
  Trainer trainer(config, dir.path / "run");
  Encoder& model = trainer.model();
  AnalysisOptions whole;
  whole.start_at_clean_values = false;
  const nlohmann::json started = analysis_to_json(analyze(model, trainer.task(), config));
  CHECK(started == analysis_to_json(analyze(model, trainer.task(), config, whole)));
  REQUIRE(started.contains("patching"));

  // A gate in block 1: its forwards start there, with the counts of whole forwards.
  model.eval();
  const analysis_detail::EvalSet set = analysis_detail::make_eval_set(trainer.task(), 7, 2, 16);
  const std::vector<std::vector<float>> gates{{1.0f, 1.0f}, {0.0f, 1.0f}};
  analysis_detail::AnalysisHooks plain(model);
  plain.set(gates);
  const EvalCounts expected = analysis_detail::evaluate(plain, set, trainer.task());
  CHECK(std::find(plain.hooks().seen().begin(), plain.hooks().seen().end(), "hook_embed") !=
        plain.hooks().seen().end());
  plain.reset();
  analysis_detail::AnalysisHooks hooks(model);
  hooks.keep_starts(set);
  hooks.set(gates);
  const EvalCounts counts = analysis_detail::evaluate(hooks, set, trainer.task());
  CHECK(counts.correct == expected.correct);
  CHECK(counts.loss_sum == expected.loss_sum);
  CHECK(counts.relation_correct == expected.relation_correct);
  const std::vector<std::string>& seen = hooks.hooks().seen();
  CHECK(std::find(seen.begin(), seen.end(), "hook_embed") == seen.end());
  CHECK(std::find(seen.begin(), seen.end(), "blocks.0.hook_resid_post") == seen.end());
  CHECK(std::find(seen.begin(), seen.end(), "blocks.1.attn.hook_z") != seen.end());
  CHECK_FALSE(hooks.hooks().has_starts());  // ended with the evaluation
  // Kept with a gate set, the values would not be the ungated run's.
  CHECK_THROWS_WITH_AS(hooks.keep_starts(set), doctest::Contains("ungated"), Error);
}
