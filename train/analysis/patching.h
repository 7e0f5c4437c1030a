#pragma once
// Activation patching's bookkeeping (Heimersheim & Nanda, "How to use and interpret activation
// patching", 2024): the logit difference LD = logit[clean label] - logit[corrupted label] at the
// measured tokens of a corrupted batch (Task::corrupt), summed over batches per relation and
// per patch site, and the fraction of the clean-minus-corrupted difference a patch restores:
//
//   restored = (LD_patched - LD_corrupted) / (LD_clean - LD_corrupted)
//
// where each LD is the mean over every measured token of every batch added: 1 when patching
// the site's clean activation into the corrupted run brings the clean run's logit difference
// back, 0 when it changes nothing. Pure arithmetic: the caller runs the model (clean, corrupted,
// and corrupted with one site patched) and hands the logits here.
//
// Usage:
//   PatchingAccumulator acc(relations, layers * heads);          // sites: l * H + h, say
//   task.corrupt(clean, r, seed, corrupted, measured);            // per batch and relation
//   const LogitDifference c = logit_difference(clean_logits, clean.labels, corrupted.labels,
//                                              measured);         // and so the corrupted run's
//   acc.add(r, site, c, k, logit_difference(patched_logits, ...)); // per site
//   std::optional<double> f = acc.restored(r, site);               // nullopt: undefined

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "core/tensor.h"

namespace headlab {

// The logit difference of one run over a set of measured tokens: the sum and how many tokens.
struct LogitDifference {
  double sum = 0.0;
  int64_t tokens = 0;

  // The mean over the tokens; 0 when there are none.
  double mean() const { return tokens > 0 ? sum / static_cast<double>(tokens) : 0.0; }
};

// Sum over the tokens i with measured[i] != 0 of logits[i, clean_labels[i]] -
// logits[i, corrupted_labels[i]], for logits [rows, C] (any leading shape: [B, T, C] or
// [B * T, C]) and the three spans [rows]. Throws headlab::Error when a span's size is not rows,
// or when a measured token's label is outside [0, C) (kIgnoreIndex at BOS included).
LogitDifference logit_difference(const Tensor& logits, std::span<const int32_t> clean_labels,
                                 std::span<const int32_t> corrupted_labels,
                                 std::span<const uint8_t> measured);

// One (relation, site)'s sums over the batches added: the three runs' logit differences over
// the same measured tokens.
struct PatchingTotals {
  double clean = 0.0, corrupted = 0.0, patched = 0.0;  // sums of LD over the tokens
  int64_t tokens = 0;                                  // measured tokens, all batches
};

class PatchingAccumulator {
 public:
  // Below this gap |mean LD_clean - mean LD_corrupted| (in logits) restored is undefined: the
  // corruption hardly moves the model's logit difference, so there is nothing to restore and
  // the ratio would be noise over noise (an untrained model, or a relation it ignores).
  static constexpr double kDefaultMinGap = 1e-6;

  // `sites` patch sites per relation, numbered 0..sites-1 as the caller chooses (l * H + h for
  // heads, say, or residual-stream positions). Throws headlab::Error unless relations and sites
  // are > 0 and min_gap >= 0.
  PatchingAccumulator(int relations, int sites, double min_gap = kDefaultMinGap);

  // One batch of relation `relation` patched at `site`: the clean, corrupted and patched runs'
  // logit differences over that batch's measured tokens (so over the same tokens: their counts
  // must agree). A batch adds its sums and its tokens, so batches weigh by their measured
  // tokens. Throws headlab::Error on a relation or site out of range or unequal token counts.
  void add(int relation, int site, const LogitDifference& clean, const LogitDifference& corrupted,
           const LogitDifference& patched);

  const PatchingTotals& totals(int relation, int site) const;
  // (mean LD_patched - mean LD_corrupted) / (mean LD_clean - mean LD_corrupted); std::nullopt
  // (undefined: JSON null) when no token was added or the gap is below min_gap. Not clamped: a
  // patch can overshoot (> 1) or hurt (< 0). Throws headlab::Error on an index out of range.
  std::optional<double> restored(int relation, int site) const;

  int relations() const { return relations_; }
  int sites() const { return sites_; }

 private:
  size_t index(const char* op, int relation, int site) const;

  int relations_, sites_;
  double min_gap_;
  std::vector<PatchingTotals> totals_;  // [relations * sites]
};

}  // namespace headlab
