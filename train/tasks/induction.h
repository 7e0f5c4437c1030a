#pragma once
// The induction task ([task] name = "induction"): next-token prediction on random tokens in
// which a segment repeats, the setting in which induction heads form (Olsson et al. 2022).
//
// A sequence has T = task.length positions: BOS (id V = task.vocab), then a prefix of fresh
// tokens, then a segment of L fresh tokens, then the same segment again, which ends the
// sequence:
//   position 0           BOS
//   positions 1..p       the prefix, p = T - 1 - 2L
//   positions p+1..p+L   the segment s_1..s_L
//   positions p+L+1..T-1 the segment again
// L is uniform in [task.min_segment, task.max_segment] per sequence, so the distance between
// the copies varies and no fixed-offset (positional) head can predict the second copy: only the
// circuit that finds the previous occurrence of the current token and reads the token after it.
//
// That layout (task.layout = "end", the default) still tells a model where the segment is: the
// second copy always ends the sequence and starts at its first repeated token, so a spread-out
// solution that reads position and the first duplicate predicts it without the circuit. With
// task.layout = "random" the T - 1 - 2L fresh tokens that are not in a copy are split into three
// runs, before, between and after the copies, uniformly over the C(F + 2, 2) ways to split
// F = T - 1 - 2L tokens into three (possibly empty) runs, so neither copy has a fixed place:
//   BOS, f0 fresh, s_1..s_L, f1 fresh, s_1..s_L, f2 fresh     f0 + f1 + f2 = F
// With task.tokens = "distinct" (the default) the T - 1 - L fresh tokens are distinct (drawn
// without replacement from [0, V)), so every token occurs at most twice and the second copy is
// the only repetition. With "uniform" each is drawn from [0, V) on its own, so tokens also recur
// by chance (V may be below T): the first repeated token no longer marks the second copy, and a
// head that matches the current token must tell the copy from chance repeats by what precedes it.
//
// Labels (next-token prediction): label(t) = token(t + 1) for t < T - 1 (BOS included: it
// predicts the first token), kIgnoreIndex at t = T - 1, which has no next token. Classes: the V
// tokens (BOS is never a target). One feature, "token" (vocab V + 1).
// Relations (gold partners):
//   PREV_TOKEN(t) = t - 1                             (t >= 1)
//   INDUCTION(t)  = j + 1, j < t the most recent position with token(j) = token(t)
//                   (kNoPartner where token(t) has not occurred before: the prefix, the first
//                   copy and BOS)
// So in the second copy INDUCTION(t) = t - L + 1, the position whose token is the label.
//
// Sentence k of batch `index` is drawn from Rng::derive(seed, index, k): L, then (layout
// "random" only) the two cuts, then the fresh tokens (distinct: a partial Fisher-Yates shuffle of
// [0, V), position i swapped with i + below(V - i); uniform: below(V) each). Layout "end" with
// distinct tokens draws exactly what it drew before the layout and tokens keys existed, so its
// runs are unchanged.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "train/tasks/task.h"

namespace headlab {

class TaskOptions;

enum class InductionLayout { kEnd, kRandom };
// How the T - 1 - L tokens that are not the second copy are drawn: distinct (without
// replacement, so the second copy is the only repetition) or uniform (each independently from
// [0, V), so tokens also recur by chance and only the previous token tells the copies apart).
enum class InductionTokens { kDistinct, kUniform };

struct InductionOptions {
  int64_t vocab = 64;       // V
  int64_t length = 32;      // T, BOS included
  int64_t min_segment = 4;  // L's range
  int64_t max_segment = 15;
  InductionLayout layout = InductionLayout::kEnd;
  InductionTokens tokens = InductionTokens::kDistinct;
};

class InductionTask final : public Task {
 public:
  static constexpr int kPrevToken = 0;  // relation indices
  static constexpr int kInduction = 1;

  // Throws headlab::Error naming the task.* key when max_segment < min_segment, 2 max_segment >
  // length - 1 (both copies must fit after BOS) or, with distinct tokens, vocab < length - 1 -
  // min_segment (too few ids for distinct fresh tokens).
  explicit InductionTask(const InductionOptions& options);

  std::string name() const override { return "induction"; }
  int64_t seq_len() const override { return options_.length; }
  int64_t num_classes() const override { return options_.vocab; }
  const std::vector<FeatureSpec>& features() const override { return features_; }
  const std::vector<std::string>& relations() const override { return relations_; }
  bool next_token() const override { return true; }
  void generate_sentences(uint64_t seed, int64_t index, int64_t first, int64_t count,
                          Batch& out) const override;
  // "BOS" or the token's id.
  std::string token_string(const std::vector<std::vector<int32_t>>& features,
                           int64_t index) const override;

  const InductionOptions& options() const { return options_; }

 private:
  InductionOptions options_;
  std::vector<FeatureSpec> features_;
  std::vector<std::string> relations_;
};

// Registry factory "induction": keys vocab, length, min_segment, max_segment, layout, tokens.
std::unique_ptr<Task> make_induction_task(TaskOptions& options);

}  // namespace headlab
