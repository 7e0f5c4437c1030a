#pragma once
// Head metrics: how much each attention head attends to the gold partner of each relation, and
// the specialization summary built on that (definitions in docs/task.md, "Metrics"). Pure
// bookkeeping over attention weights and gold partner positions; no model, no autograd.
//
// Notation: L layers, H heads per layer, R relations, B batch, T sequence length.
// A[l, h, i, j] is the weight of head h in layer l from query i to key j; p_r(i) is the gold
// partner of relation r for query i, or kNoPartner (-1) where query i has none for r (a word
// of the conllu task with no dependent for CHILD, or with another DEPREL for a label relation).
// Every metric averages over counted queries only (the non-BOS positions), pooled over all
// batches given to the accumulator; a relation's metrics average over the counted queries that
// have a partner for it (relation_queries), so a query without one neither scores nor lowers
// that relation's score.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "train/eval/evaluation.h"
#include "train/tasks/task.h"

namespace headlab {

// One attention head: (layer, head). layer = -1 means "none".
struct HeadRef {
  int layer = -1;
  int head = -1;
  bool valid() const { return layer >= 0 && head >= 0; }
  bool operator==(const HeadRef&) const = default;
};

// A dense [L, H, R] array of doubles.
struct HeadRelationMatrix {
  int layers = 0, heads = 0, relations = 0;
  std::vector<double> values;  // [L * H * R], row-major

  HeadRelationMatrix() = default;
  HeadRelationMatrix(int l, int h, int r)
      : layers(l), heads(h), relations(r), values(static_cast<size_t>(l) * h * r, 0.0) {}
  double& at(int l, int h, int r) {
    return values[(static_cast<size_t>(l) * heads + h) * relations + r];
  }
  double at(int l, int h, int r) const {
    return values[(static_cast<size_t>(l) * heads + h) * relations + r];
  }
};

// Everything measured per head, averaged over counted queries.
struct HeadMetrics {
  int layers = 0, heads = 0, relations = 0;
  // M[l, h, r] = mean_i A[l, h, i, p_r(i)] over the queries with a partner for r.
  HeadRelationMatrix mass;
  // M restricted to queries whose R partners are all real (not position 0, BOS, and not
  // kNoPartner) and pairwise distinct; zero when no such query was seen.
  HeadRelationMatrix mass_distinct;
  // mean_i [argmax_j A[l, h, i, j] == p_r(i)] (Clark et al. 2019); ties go to the lowest j.
  HeadRelationMatrix argmax_accuracy;
  std::vector<double> confidence;  // [L * H]: mean_i max_j A[l, h, i, j] (Voita et al. 2019)
  std::vector<double> entropy;     // [L * H]: mean_i -sum_j A log A, in nats (0 log 0 = 0)
  int64_t queries = 0;             // counted queries
  int64_t distinct_queries = 0;    // of which had R real, pairwise distinct partners
  // [R]: of which had a partner for relation r (the denominator of r's mass and argmax
  // accuracy); queries - relation_queries[r] had none.
  std::vector<int64_t> relation_queries;

  double head_confidence(int l, int h) const {
    return confidence[static_cast<size_t>(l) * heads + h];
  }
  double head_entropy(int l, int h) const { return entropy[static_cast<size_t>(l) * heads + h]; }
};

// The counted queries of a batch: 1 where a token carries a label (not kIgnoreIndex: not BOS).
std::vector<uint8_t> labelled_tokens(const Batch& batch);

// The checks of HeadMetricsAccumulator::add below, for other accumulators of the same inputs.
void check_attention_inputs(int layers, int heads, int relations, std::span<const Tensor> attention,
                            std::span<const std::vector<int32_t>> partners,
                            std::span<const uint8_t> counted);

// Accumulates head metrics over batches.
class HeadMetricsAccumulator {
 public:
  // Throws headlab::Error unless layers, heads, relations > 0. With mass_only, add() reads
  // only the partners' weights (mass, distinct-partner mass): argmax accuracy, confidence and
  // entropy stay 0, and the cost per query is L * H * R reads instead of L * H * T logs (the
  // trainer's timeline at every evaluation).
  HeadMetricsAccumulator(int layers, int heads, int relations, bool mass_only = false);

  // attention: one tensor per layer, each [B, H, T, T] (rows sum to 1).
  // partners: R vectors of B*T key positions (index b*T + i), or kNoPartner where the query
  //   has no partner for that relation: it is then skipped for that relation only.
  // counted: B*T flags; a query counts when its flag is nonzero (the non-BOS positions).
  // Throws headlab::Error ("head_metrics: ...") on a wrong number of layers or relations, a
  // shape other than [B, H, T, T], vectors not of size B*T, or a partner outside [0, T) and
  // not kNoPartner on a counted query.
  void add(std::span<const Tensor> attention, std::span<const std::vector<int32_t>> partners,
           std::span<const uint8_t> counted);

  HeadMetrics finish() const;

 private:
  int layers_, heads_, relations_;
  bool mass_only_;
  HeadRelationMatrix mass_sum_, distinct_sum_, argmax_hits_;
  std::vector<double> confidence_sum_, entropy_sum_;
  int64_t queries_ = 0, distinct_queries_ = 0;
  std::vector<int64_t> relation_queries_;  // [R]
};

// The specialization summary over a mass matrix M (docs/task.md, "Metrics"):
//   s_max = mean_r max_{l,h} M[l, h, r];
//   s_match = max over one-to-one assignments of relations to distinct (layer, head) pairs of
//     mean_r M[assigned(r), r]; a relation left without a head contributes 0;
//   n_claimed = number of relations whose assigned head has M > claim_threshold.
struct Specialization {
  double s_max = 0.0;
  double s_match = 0.0;
  int n_claimed = 0;
  double claim_threshold = 0.5;     // the threshold n_claimed was counted with
  std::vector<HeadRef> assignment;  // [R]; invalid HeadRef for an unassigned relation
};

// Exact best assignment by dynamic programming over (heads seen, set of relations used):
// O(L*H * 2^R * R) time. Throws headlab::Error if R > 16 (the subset table would not fit).
// Among equal-scoring assignments the one found first in head order (layer-major) wins.
Specialization specialization(const HeadRelationMatrix& mass, double claim_threshold = 0.5);

// Relation groups for group ablation: group r holds every head whose largest mass is on r
// (the lowest r on ties) and exceeds min_mass. Returns R lists of heads in layer-major order.
std::vector<std::vector<HeadRef>> relation_groups(const HeadRelationMatrix& mass,
                                                  double min_mass = 0.3);

// Head gates [L][H], all ones except the listed heads, which are 0.
std::vector<std::vector<float>> gates_without(int layers, int heads, std::span<const HeadRef> off);
// Head gates [L][H] keeping only `keep` in its layer (its layer's other heads 0, every other
// layer all ones).
std::vector<std::vector<float>> gates_keep_only(int layers, int heads, HeadRef keep);

// Accuracy and per-relation component accuracy of predicted labels over counted positions: the
// component of relation r counts the positions where task.relation_correct(predicted, gold, r).
struct LabelAccuracy {
  double accuracy = 0.0;
  std::vector<double> component;  // [R]
  int64_t count = 0;
};

// The figures of the one accuracy counter's counts (train/eval/evaluation.h).
LabelAccuracy label_accuracy(const EvalCounts& counts);

// drop[r][c] = base.component[c] - ablated[r].component[c]: the relation-group ablation matrix
// (row: the group gated off; column: the label component whose accuracy drops).
// Throws headlab::Error when component counts differ.
std::vector<std::vector<double>> group_ablation_drops(const LabelAccuracy& base,
                                                      std::span<const LabelAccuracy> ablated);

}  // namespace headlab
