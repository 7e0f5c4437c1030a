#pragma once
// Chance baselines for the head scores (docs/analysis.md, "Baselines"): what a head with no
// knowledge of the relation would score on the same evaluation queries, so that every mass,
// argmax accuracy, path mass and ablation drop can be read against chance rather than against 0.
//
//   mass_uniform[r]   = mean_i |{j visible to i : j == p_r(i)}| / |visible(i)|
//                       the mass a head attending uniformly over the keys query i can see puts
//                       on r's gold partner (1/T with T visible keys and one partner);
//   argmax_offset[r]  = max_d mean_i [i + d == p_r(i)] (Clark et al. 2019): the argmax accuracy
//                       of the best fixed-offset head ("always look d to the left/right"); a
//                       query whose i + d falls outside [0, T), or on a padded key, is a miss;
//   the spread of accuracy across evaluation batches, for ablation drops.
// The queries averaged over are the counted ones, as in HeadMetricsAccumulator (relation r's
// over those with a partner for r, mass_distinct over the distinct-partner queries), so a score
// and its baseline share a denominator.

#include <cstdint>
#include <span>
#include <vector>

#include "train/analysis/head_metrics.h"
#include "train/eval/evaluation.h"

namespace headlab {

struct ChanceBaselines {
  std::vector<double> mass_uniform;           // [R]
  std::vector<double> mass_distinct_uniform;  // [R]; 0 when no distinct-partner query was seen
  std::vector<double> argmax_offset;          // [R]
  std::vector<int64_t>
      argmax_offset_offset;  // [R]: the winning d (ties: the lowest d; 0 if no hit)
  int64_t queries = 0, distinct_queries = 0;
  std::vector<int64_t> relation_queries;  // [R]: counted queries with a partner for r
};

class ChanceBaselineAccumulator {
 public:
  // Throws headlab::Error unless relations > 0.
  explicit ChanceBaselineAccumulator(int relations);

  // One batch of B sequences of T tokens. partners and counted as HeadMetricsAccumulator::add;
  // key_padding: empty (every key visible) or B*T flags, nonzero marking a padded key (the
  // Encoder's key_padding_mask): query i of sequence b sees the unpadded keys of b. Throws
  // headlab::Error ("baselines: ...") on vectors not of size B*T, a partner outside [0, T) and
  // not kNoPartner on a counted query, or a counted query that sees no key.
  void add(int64_t B, int64_t T, std::span<const std::vector<int32_t>> partners,
           std::span<const uint8_t> counted, std::span<const uint8_t> key_padding = {});

  ChanceBaselines finish() const;

 private:
  int relations_;
  std::vector<double> uniform_sum_, distinct_sum_;
  // offset_hits_[r][d + max_offset_]: queries with i + d == p_r(i); grows with T.
  std::vector<std::vector<int64_t>> offset_hits_;
  int64_t max_offset_ = 0;
  int64_t queries_ = 0, distinct_queries_ = 0;
  std::vector<int64_t> relation_queries_;  // [R]
};

// The spread of accuracy across the evaluation batches (the ungated model): the sample standard
// deviation of the per-batch accuracies and their number. ablation_drop_baseline = 2 x the
// standard error sd / sqrt(n): an ablation drop below it is within what another draw of n
// evaluation batches could move the accuracy (about a 95% interval). With fewer than two
// batches no spread is measurable: defined is false and the figures are 0.
struct AccuracySpread {
  double mean = 0.0, sd = 0.0, standard_error = 0.0, drop_baseline = 0.0;
  int64_t batches = 0;
  bool defined = false;
};
AccuracySpread accuracy_spread(std::span<const EvalCounts> per_batch);

// Clark et al. 2019's table: per relation, the head with the highest argmax accuracy (the first
// in layer-major order on ties), its accuracy, the best offset head's and the margin between.
struct BestHead {
  HeadRef head;
  double argmax_accuracy = 0.0;
  double offset_baseline = 0.0;
  int64_t offset = 0;
  double margin = 0.0;  // argmax_accuracy - offset_baseline
};
// Throws headlab::Error when the baselines' relations differ from the matrix's.
std::vector<BestHead> best_heads(const HeadRelationMatrix& argmax_accuracy,
                                 const ChanceBaselines& baselines);

}  // namespace headlab
