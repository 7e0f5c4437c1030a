// Induction heads: the induction task's sequences and gold partners, causal attention-only
// models, and the language-model head scores (detectors, in-context score, K-composition) on
// hand-built attention patterns and weights whose answers are computed here by hand.

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "autograd/grad_mode.h"
#include "core/error.h"
#include "core/rng.h"
#include "layers/encoder.h"
#include "layers/hooks.h"
#include "train/analysis/induction.h"
#include "train/config/config.h"
#include "train/report/sections.h"
#include "train/tasks/induction.h"
#include "train/tasks/registry.h"

using namespace headlab;
using headlab::report_parts::midpoint_step;

TEST_CASE("induction task: BOS, distinct fresh tokens, the segment repeated at the end") {
  InductionOptions o;  // V 64, T 32, L in [4, 15]
  const InductionTask task(o);
  Batch b;
  task.generate(7, 3, 64, b);
  const int64_t T = 32;
  REQUIRE(b.seq_len == T);
  for (int64_t s = 0; s < 64; ++s) {
    const int32_t* tok = b.features[0].data() + s * T;
    CHECK(tok[0] == 64);
    // L: the first position whose token occurred before is the start of the second copy, T - L.
    int64_t second = -1;
    for (int64_t t = 1; t < T && second < 0; ++t)
      for (int64_t j = 1; j < t; ++j)
        if (tok[j] == tok[t]) second = t;
    REQUIRE(second > 0);
    const int64_t L = T - second;
    CHECK(L >= 4);
    CHECK(L <= 15);
    for (int64_t t = 0; t < T; ++t) {
      const size_t at = static_cast<size_t>(s * T + t);
      CHECK(b.labels[at] == (t + 1 < T ? tok[t + 1] : kIgnoreIndex));
      CHECK(b.partners[InductionTask::kPrevToken][at] == (t == 0 ? kNoPartner : t - 1));
      const int32_t induction = b.partners[InductionTask::kInduction][at];
      if (t >= second) {
        CHECK(tok[t] == tok[t - L]);
        CHECK(induction == t - L + 1);
        CHECK(tok[induction] == b.labels[at - L]);  // the token after the previous occurrence
        if (t + 1 < T) CHECK(b.labels[at] == tok[induction]);
      } else {
        CHECK(induction == kNoPartner);
      }
    }
  }
  // A pure function of (seed, index, sentence): sentence 5 alone is the batch's sentence 5.
  Batch one;
  task.generate_sentences(7, 3, 5, 1, one);
  CHECK(std::vector<int32_t>(one.features[0]) ==
        std::vector<int32_t>(b.features[0].begin() + 5 * T, b.features[0].begin() + 6 * T));
  CHECK(task.token_string(b.features, 0) == "BOS");
  CHECK(task.next_token());
}

TEST_CASE("induction task, layout random: the copies anywhere, partners still exact") {
  InductionOptions o;  // V 64, T 32, L in [4, 15]
  o.layout = InductionLayout::kRandom;
  const InductionTask task(o);
  Batch b;
  task.generate(11, 2, 256, b);
  const int64_t T = 32;
  int64_t ends_last = 0, first_at_one = 0;
  std::vector<int64_t> starts_seen(T, 0);
  for (int64_t s = 0; s < 256; ++s) {
    const int32_t* tok = b.features[0].data() + s * T;
    CHECK(tok[0] == 64);
    // The repeated positions: t with an earlier equal token; they are one run of L, the copy
    // of the run of L that starts at their first token's earlier occurrence.
    int64_t second = -1, L = 0, first = -1;
    for (int64_t t = 1; t < T; ++t)
      for (int64_t j = 1; j < t; ++j)
        if (tok[j] == tok[t]) {
          if (second < 0) second = t, first = j;
          CHECK(t == second + L);  // contiguous
          CHECK(j == first + L);   // in the same order as the first copy
          ++L;
        }
    REQUIRE(second > 0);
    CHECK(L >= 4);
    CHECK(L <= 15);
    CHECK(first + L <= second);
    ends_last += second + L == T;
    first_at_one += first == 1;
    ++starts_seen[static_cast<size_t>(second)];
    for (int64_t t = 0; t < T; ++t) {
      const size_t at = static_cast<size_t>(s * T + t);
      CHECK(b.labels[at] == (t + 1 < T ? tok[t + 1] : kIgnoreIndex));
      const int32_t induction = b.partners[InductionTask::kInduction][at];
      if (t >= second && t < second + L) {
        CHECK(induction == first + (t - second) + 1);
        CHECK(tok[induction - 1] == tok[t]);
      } else {
        CHECK(induction == kNoPartner);
      }
    }
  }
  // Neither copy has a fixed place: most second copies stop before the end, most first copies
  // start after position 1, and the second copy starts at many positions.
  CHECK(ends_last < 128);
  CHECK(first_at_one < 128);
  CHECK(std::count_if(starts_seen.begin(), starts_seen.end(), [](int64_t n) { return n > 0; }) >=
        12);
}

TEST_CASE("induction task, uniform tokens: chance repeats, partners at the most recent one") {
  InductionOptions o;  // T 32, L in [4, 15]
  o.vocab = 8;         // fewer ids than fresh tokens: allowed only when they may repeat
  o.tokens = InductionTokens::kUniform;
  const int64_t T = 32, V = 8;
  for (const InductionLayout layout : {InductionLayout::kEnd, InductionLayout::kRandom}) {
    CAPTURE(static_cast<int>(layout));
    o.layout = layout;
    const InductionTask task(o);
    Batch b;
    task.generate(5, 1, 128, b);
    std::vector<int64_t> count(V, 0);
    for (int64_t s = 0; s < 128; ++s) {
      const int32_t* tok = b.features[0].data() + s * T;
      CHECK(tok[0] == V);
      // Some run of L in [4, 15] is an earlier run again (at the very end for layout "end").
      bool copied = false;
      for (int64_t L = 4; L <= 15 && !copied; ++L)
        for (int64_t second = 1 + L; second + L <= T && !copied; ++second) {
          if (layout == InductionLayout::kEnd && second + L != T) continue;
          for (int64_t first = 1; first + L <= second && !copied; ++first)
            copied = std::equal(tok + first, tok + first + L, tok + second);
        }
      CHECK(copied);
      for (int64_t t = 0; t < T; ++t) {
        const size_t at = static_cast<size_t>(s * T + t);
        CHECK(b.labels[at] == (t + 1 < T ? tok[t + 1] : kIgnoreIndex));
        if (t > 0) {
          REQUIRE(tok[t] >= 0);
          REQUIRE(tok[t] < V);
          ++count[static_cast<size_t>(tok[t])];
        }
        int32_t expected = kNoPartner;  // the position after the most recent earlier occurrence
        for (int64_t j = t - 1; j >= 0 && expected == kNoPartner; --j)
          if (tok[j] == tok[t]) expected = static_cast<int32_t>(j + 1);
        CHECK(b.partners[InductionTask::kInduction][at] == expected);
      }
    }
    // Every id is drawn, none far from its share of the 128 x 31 tokens (496 each).
    for (const int64_t n : count) {
      CHECK(n > 350);
      CHECK(n < 650);
    }
  }
}

TEST_CASE("induction task: bad options get one line naming the key") {
  const auto error = [](const std::string& keys) {
    try {
      parse_config("[task]\nname = \"induction\"\n" + keys, "t.toml");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(error("max_segment = 16\n") ==
        "t.toml:3:15: task.max_segment = 16 is too long for task.length = 32: both copies must "
        "fit after BOS (expected max_segment <= 15)");
  CHECK(error("vocab = 20\n") ==
        "t.toml:3:9: task.vocab = 20 is too small: the fresh tokens of a sequence are distinct, so "
        "expected vocab >= length - 1 - min_segment = 27");
  CHECK(error("min_segment = 9\nmax_segment = 8\n") ==
        "t.toml:4:15: task.max_segment = 8 is below task.min_segment = 9");
  CHECK(error("length = 2\n").find("task.length = 2 is out of range") != std::string::npos);
  CHECK(error("layout = \"middle\"\n").find("task.layout") != std::string::npos);
  CHECK(error("layout = \"random\"\n") == "no error");
  CHECK(error("tokens = \"uniform\"\nvocab = 8\n") == "no error");  // ids may repeat
  CHECK(error("tokens = \"sorted\"\n").find("task.tokens") != std::string::npos);
  CHECK(error("segment = 2\n").find("unknown key task.segment") != std::string::npos);
  for (const std::string& e : {error("max_segment = 16\n"), error("vocab = 20\n")})
    CHECK(e.find('\n') == std::string::npos);
}

TEST_CASE("causal encoder: no query attends to a later key, on the fused and per-head paths") {
  Rng rng(3);
  EncoderOptions opt;
  opt.vocab_sizes = {6};
  opt.max_len = 5;
  opt.d_model = 8;
  opt.heads = 2;
  opt.layers = 2;
  opt.d_ff = 0;
  opt.causal = true;
  opt.num_classes = 6;
  Encoder model(opt, rng);
  std::vector<int32_t> ids = {0, 1, 2, 3, 4, 5, 4, 3, 2, 1};
  const auto upper_zero = [](const Tensor& w) {  // [B, H, T, T]
    const int64_t T = w.size(3);
    bool zero = true, rows = true;
    for (int64_t r = 0; r < w.numel() / T; ++r) {
      double sum = 0;
      for (int64_t s = 0; s < T; ++s) {
        sum += w[r * T + s];
        if (s > r % T) zero = zero && w[r * T + s] == 0.0f;
      }
      rows = rows && std::fabs(sum - 1.0) < 1e-5;
    }
    return zero && rows;
  };
  {  // fused: weights where no gradient is recorded
    NoGradGuard g;
    const EncoderOutput out = model.forward({ids}, 2, 5, nullptr, true);
    for (const Var& w : out.weights) CHECK(upper_zero(w.value()));
  }
  {  // per head: hook_scores read, gradients on
    Hooks hooks;
    hooks.cache("blocks.1.attn.hook_scores");
    hooks.cache("blocks.1.attn.hook_pattern");
    HookGuard guard(model, hooks);
    const EncoderOutput out = model.forward({ids}, 2, 5, nullptr, true);
    CHECK(upper_zero(out.weights[1].value()));
    CHECK(upper_zero(hooks.cached("blocks.1.attn.hook_pattern").value()));
    const Tensor& scores = hooks.cached("blocks.1.attn.hook_scores").value();
    CHECK(std::isinf(scores[1]));  // query 0, key 1
    CHECK(scores[1] < 0);
  }
  // A later token changes no earlier position's logits.
  NoGradGuard g;
  const Tensor before = model.forward({ids}, 2, 5).logits.value();
  ids[3] = 0;  // sentence 0, position 3
  const Tensor after = model.forward({ids}, 2, 5).logits.value();
  for (int64_t i = 0; i < 3 * 6; ++i) CHECK(before[i] == after[i]);
  bool changed = false;
  for (int64_t i = 3 * 6; i < 5 * 6; ++i) changed = changed || before[i] != after[i];
  CHECK(changed);
}

TEST_CASE("attention-only layers (d_ff = 0): no ffn, no norm2, the residual after attention") {
  Rng rng(4);
  EncoderOptions opt;
  opt.vocab_sizes = {6};
  opt.max_len = 5;
  opt.d_model = 8;
  opt.heads = 2;
  opt.layers = 2;
  opt.d_ff = 0;
  opt.num_classes = 6;
  Encoder model(opt, rng);
  int64_t count = 0;
  for (const NamedParameter& p : model.named_parameters()) {
    CHECK(p.name.find("ffn") == std::string::npos);
    CHECK(p.name.find("norm2") == std::string::npos);
    count += p.var.value().numel();
  }
  CHECK(count == Encoder::parameter_count(opt));
  CHECK(model.layer(0).attention_only());
  Hooks hooks;
  hooks.cache("blocks.0.hook_resid_mid");
  hooks.cache("blocks.0.hook_resid_post");
  HookGuard guard(model, hooks);
  const std::vector<int32_t> ids = {0, 1, 2, 3, 4};
  model.forward({ids}, 1, 5);
  const Tensor& mid = hooks.cached("blocks.0.hook_resid_mid").value();
  const Tensor& post = hooks.cached("blocks.0.hook_resid_post").value();
  for (int64_t i = 0; i < mid.numel(); ++i) CHECK(mid[i] == post[i]);
  opt.d_ff = -1;
  CHECK_THROWS_WITH_AS(Encoder(opt, rng), doctest::Contains("d_ff is -1"), Error);
}

TEST_CASE("lm head detectors: previous-token, duplicate-token and induction heads by hand") {
  // Tokens 9 1 2 3 1 2 7: the 1 at t = 4 occurred at 1 (induction target 2), the 2 at t = 5
  // at 2 (target 3). The last position has no label and does not count.
  const int64_t T = 7, H = 3;
  const std::vector<int32_t> tokens = {9, 1, 2, 3, 1, 2, 7};
  std::vector<int32_t> labels = {1, 2, 3, 1, 2, 7, kIgnoreIndex};
  Tensor a = Tensor::zeros({1, H, T, T});
  const auto at = [&](int64_t h, int64_t t, int64_t s) -> float& {
    return a.data()[(h * T + t) * T + s];
  };
  for (int64_t t = 0; t < T; ++t) {
    at(0, t, t == 0 ? 0 : t - 1) = 1.0f;                            // head 0: the previous token
    for (int64_t s = 0; s <= t; ++s) at(1, t, s) = 1.0f / (t + 1);  // head 1: uniform
    at(2, t, t == 4 ? 2 : t == 5 ? 3 : 0) = 1.0f;                   // head 2: induction, else BOS
  }
  LmHeadAccumulator acc(1, static_cast<int>(H));
  acc.add({a}, tokens, labels, 1, T);
  const LmHeadScores s = acc.finish();
  CHECK(s.previous_queries == 5);   // t = 1..5
  CHECK(s.duplicate_queries == 2);  // t = 4, 5
  CHECK(s.previous_token[0] == doctest::Approx(1.0));
  CHECK(s.duplicate_token[0] == doctest::Approx(0.0));
  CHECK(s.induction[0] == doctest::Approx(0.0));
  // Uniform: previous (1/2 + 1/3 + 1/4 + 1/5 + 1/6) / 5; duplicate and induction (1/5 + 1/6) / 2.
  CHECK(s.previous_token[1] == doctest::Approx((0.5 + 1.0 / 3 + 0.25 + 0.2 + 1.0 / 6) / 5));
  CHECK(s.duplicate_token[1] == doctest::Approx((0.2 + 1.0 / 6) / 2));
  CHECK(s.induction[1] == doctest::Approx((0.2 + 1.0 / 6) / 2));
  // Head 2 attends to BOS except at 4 and 5: previous only at t = 1 (its previous is BOS).
  CHECK(s.previous_token[2] == doctest::Approx(0.2));
  CHECK(s.duplicate_token[2] == doctest::Approx(0.0));
  CHECK(s.induction[2] == doctest::Approx(1.0));
  CHECK_THROWS_AS(acc.add({a}, tokens, labels, 1, T - 1), Error);
}

TEST_CASE("in-context score: mean loss of the late quarter minus the early quarter") {
  // T = 9: 8 predictions, quarters of q = 2: early positions 0-1, late 6-7; position 8 predicts
  // nothing and the middle is left out, so 100 there must not count.
  const std::vector<double> loss = {5, 3, 100, 100, 100, 100, 2, 1, 100};
  const InContextScore c = in_context_score(loss, 9);
  CHECK(c.early_begin == 0);
  CHECK(c.early_end == 2);
  CHECK(c.late_begin == 6);
  CHECK(c.late_end == 8);
  CHECK(c.early_loss == doctest::Approx(4.0));  // (5 + 3) / 2
  CHECK(c.late_loss == doctest::Approx(1.5));   // (2 + 1) / 2
  CHECK(c.score == doctest::Approx(-2.5));
  // T = 32 (configs/induction.toml): 31 predictions, q = 7: positions 0-6 and 24-30.
  std::vector<double> ramp(32);
  for (size_t t = 0; t < ramp.size(); ++t) ramp[t] = 4.0 - 0.1 * static_cast<double>(t);
  const InContextScore r = in_context_score(ramp, 32);
  CHECK(r.early_end == 7);
  CHECK(r.late_begin == 24);
  CHECK(r.late_end == 31);
  CHECK(r.score == doctest::Approx((4.0 - 2.7) - (4.0 - 0.3)));  // means at t = 27 and 3: -2.4
  // T = 3: 2 predictions, q = 1: one position each.
  const InContextScore s = in_context_score(std::vector<double>{2, 1, 9}, 3);
  CHECK(s.score == doctest::Approx(-1.0));
  CHECK_THROWS_AS(in_context_score(loss, 8), Error);
  CHECK_THROWS_AS(in_context_score(std::vector<double>{1, 2}, 2), Error);
}

TEST_CASE("midpoint step: the first step half of the way from the first value to the last") {
  const std::vector<double> steps = {0, 50, 100, 150, 200};
  // Rising 0 -> 0.9, midpoint 0.45: 0.46 at step 100 (a 0.5 threshold would say 150).
  CHECK(midpoint_step(steps, std::vector<double>{0, 0.1, 0.46, 0.8, 0.9}) == 100);
  // Falling -0.5 -> -2.5, midpoint -1.5: reached exactly at step 150.
  CHECK(midpoint_step(steps, std::vector<double>{-0.5, -0.75, -1.0, -1.5, -2.5}) == 150);
  CHECK(midpoint_step(steps, std::vector<double>{1, 2, 3, 2, 1}) == -1);  // no net change
  CHECK(midpoint_step({}, {}) == -1);
  CHECK_THROWS_AS(midpoint_step(steps, std::vector<double>{1, 2}), Error);
}

TEST_CASE("loss by position: the mean cross-entropy at each position over sequences") {
  // Logits of 2 sequences of 3 positions, 2 classes; the last position has no label.
  const Tensor logits = Tensor::from({2, 3, 2}, {0, 0, std::log(3.0f), 0, 5, 5,  //
                                                 0, 0, 0, std::log(3.0f), 1, 2});
  const std::vector<int32_t> labels = {0, 0, kIgnoreIndex, 1, 0, kIgnoreIndex};
  PositionLossAccumulator p(3);
  p.add(logits, labels);
  const std::vector<double> m = p.mean();
  CHECK(m[0] == doctest::Approx(std::log(2.0)));  // both uniform
  // Position 1: -log(3/4) (class 0 of [log 3, 0]) and -log(1/4) (class 0 of [0, log 3]).
  CHECK(m[1] == doctest::Approx((std::log(4.0 / 3.0) + std::log(4.0)) / 2));
  CHECK(m[2] == 0.0);
}

TEST_CASE("K-composition: ||W_QK W_OV||_F / (||W_QK||_F ||W_OV||_F) of hand-set heads") {
  // D = 2, two heads of width 1 per layer. Lower head 0: W_V = [1 0], W_O = [0 1]^T, so
  // W_OV = [[0 0] [1 0]] (e0 -> e1); lower head 1: W_V = [0 1], W_O = [1 0]^T, W_OV = [[0 1] [0 0]].
  // Upper head 0: W_Q = W_K = [0 1], W_QK = [[0 0] [0 1]]; upper head 1: W_Q = [0 1],
  // W_K = [1 1], W_QK = [[0 0] [1 1]] (norm sqrt 2).
  Rng rng(1);
  MultiHeadAttention lower({2, 2}, rng), upper({2, 2}, rng);
  lower.in_proj_weight.value().copy_(Tensor::from({6, 2}, {9, 9, 9, 9, 9, 9, 9, 9, 1, 0, 0, 1}));
  lower.w_o->weight.value().copy_(Tensor::from({2, 2}, {0, 1, 1, 0}));
  upper.in_proj_weight.value().copy_(Tensor::from({6, 2}, {0, 1, 0, 1, 0, 1, 1, 1, 5, 5, 5, 5}));
  const std::vector<std::vector<double>> k = k_composition(lower, upper);
  REQUIRE(k.size() == 2);
  // Upper 0: W_QK W_OV0 = [[0 0] [1 0]], norm 1 -> 1; W_QK W_OV1 = 0 -> 0.
  CHECK(k[0][0] == doctest::Approx(1.0));
  CHECK(k[0][1] == doctest::Approx(0.0));
  // Upper 1: [[0 0] [1 1]] [[0 0] [1 0]] = [[0 0] [1 0]] and [[0 0] [1 1]] [[0 1] [0 0]] =
  // [[0 0] [0 1]]: both norm 1, over sqrt 2 x 1.
  CHECK(k[1][0] == doctest::Approx(1.0 / std::sqrt(2.0)));
  CHECK(k[1][1] == doctest::Approx(1.0 / std::sqrt(2.0)));
}
