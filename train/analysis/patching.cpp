#include "train/analysis/patching.h"

#include <cmath>

#include "core/error.h"

namespace headlab {

LogitDifference logit_difference(const Tensor& logits, std::span<const int32_t> clean_labels,
                                 std::span<const int32_t> corrupted_labels,
                                 std::span<const uint8_t> measured) {
  if (!logits.defined() || logits.rank() < 1)
    fail("logit_difference: logits are undefined or of rank 0; expected [rows, classes]");
  const int64_t classes = logits.size(-1);
  const int64_t rows = classes > 0 ? logits.numel() / classes : 0;
  const auto n = static_cast<size_t>(rows);
  if (clean_labels.size() != n || corrupted_labels.size() != n || measured.size() != n)
    fail(
        "logit_difference: {} clean labels, {} corrupted labels and {} measured flags for {} rows "
        "of logits {}",
        clean_labels.size(), corrupted_labels.size(), measured.size(), rows, logits.shape().str());
  LogitDifference out;
  const float* x = logits.data();
  for (size_t i = 0; i < n; ++i) {
    if (!measured[i]) continue;
    const int32_t a = clean_labels[i], b = corrupted_labels[i];
    if (a < 0 || a >= classes || b < 0 || b >= classes)
      fail(
          "logit_difference: measured token {} has clean label {} and corrupted label {}, "
          "expected both in [0, {})",
          i, a, b, classes);
    const float* row = x + static_cast<int64_t>(i) * classes;
    out.sum += static_cast<double>(row[a]) - static_cast<double>(row[b]);
    ++out.tokens;
  }
  return out;
}

PatchingAccumulator::PatchingAccumulator(int relations, int sites, double min_gap)
    : relations_(relations), sites_(sites), min_gap_(min_gap) {
  if (relations < 1 || sites < 1)
    fail("PatchingAccumulator: {} relations and {} sites, expected both >= 1", relations, sites);
  if (!(min_gap >= 0.0)) fail("PatchingAccumulator: min_gap is {} but expected >= 0", min_gap);
  totals_.resize(static_cast<size_t>(relations) * static_cast<size_t>(sites));
}

size_t PatchingAccumulator::index(const char* op, int relation, int site) const {
  if (relation < 0 || relation >= relations_ || site < 0 || site >= sites_)
    fail("PatchingAccumulator::{}: relation {}, site {} is outside {} relations x {} sites", op,
         relation, site, relations_, sites_);
  return static_cast<size_t>(relation) * static_cast<size_t>(sites_) + static_cast<size_t>(site);
}

void PatchingAccumulator::add(int relation, int site, const LogitDifference& clean,
                              const LogitDifference& corrupted, const LogitDifference& patched) {
  const size_t at = index("add", relation, site);
  if (clean.tokens != corrupted.tokens || clean.tokens != patched.tokens)
    fail(
        "PatchingAccumulator::add: the clean, corrupted and patched runs have {}, {} and {} "
        "measured tokens; expected the same tokens in all three",
        clean.tokens, corrupted.tokens, patched.tokens);
  PatchingTotals& t = totals_[at];
  t.clean += clean.sum;
  t.corrupted += corrupted.sum;
  t.patched += patched.sum;
  t.tokens += clean.tokens;
}

const PatchingTotals& PatchingAccumulator::totals(int relation, int site) const {
  return totals_[index("totals", relation, site)];
}

std::optional<double> PatchingAccumulator::restored(int relation, int site) const {
  const PatchingTotals& t = totals_[index("restored", relation, site)];
  if (t.tokens == 0) return std::nullopt;
  const auto n = static_cast<double>(t.tokens);
  const double clean = t.clean / n, corrupted = t.corrupted / n, patched = t.patched / n;
  const double gap = clean - corrupted;
  if (!(std::abs(gap) >= min_gap_) || std::abs(gap) == 0.0) return std::nullopt;
  return (patched - corrupted) / gap;
}

}  // namespace headlab
