#pragma once
// Composition across layers: which lower-layer head a head builds on.
//
// Two-step attention paths (attention rollout through one head per layer, after Abnar and
// Zuidema 2020): for a head Y in layer l2 >= 1, a head X in a layer l1 < l2 and a relation r,
//   P[Y, X, r] = mean_i sum_j A_Y[i, j] A_X[j, p_r(i)]
// is how much of query i's attention, going through Y to some key j and from there through X,
// ends on r's gold partner. A relation no single head can reach in one step (BEFORE_HEAD, the
// word before my syntactic head: docs/task.md) shows up as a path: Y looks at my head j, and X
// at j had looked at j - 1, so Y reads from j what X put there.
//
// For every head Y of layer >= 1 the analysis names the path with the largest P: its relation r
// and the head X it composes with; and, for every lower head X', P[Y, X', r] and Y's own mass
// M[Y, r] with X' gated off (a drop there means Y's query or key depends on X': it cannot find
// its partner without it).
//
// Chance: a uniform upper head reaches the partner too, through whatever X puts on it. The
// baseline of a path replaces Y by a head attending uniformly over the keys query i can see,
//   P_uniform[X, r] = mean_i sum_{j visible(i)} (1 / |visible(i)|) A_X[j, p_r(i)]
// (the same for every Y above X). The other null replaces X, the lower head, by a uniform head:
//   P_uniform_lower[Y, r] = mean_i sum_j A_Y[i, j] [p_r(i) visible] / |visible|
// (1/T without padding: Y's path then reaches the partner no better than a uniform head does).
// Composition is claimed only when P exceeds both by kCompositionMargin (docs/analysis.md,
// "Baselines").

#include <cstdint>
#include <span>
#include <vector>

#include "core/tensor.h"
#include "train/analysis/head_metrics.h"

namespace headlab {

// How far a path's mass must exceed its uniform-Y baseline for composition to be claimed: an
// absolute margin in units of one query's attention (path masses and baselines both lie in
// [0, 1]). Absolute rather than a ratio because the baseline is often near 1/T: twice 0.03 is
// still noise, while a tenth of every query's attention arriving through Y beyond what a
// uniform Y delivers is a path Y's weights must have chosen.
inline constexpr double kCompositionMargin = 0.1;

// P[Y, X, r] for every pair of heads with X in a lower layer than Y; 0 elsewhere.
struct PathMass {
  int layers = 0, heads = 0, relations = 0;
  std::vector<double> values;         // [(L*H) * (L*H) * R]: index (y * L*H + x) * R + r
  std::vector<double> uniform;        // [(L*H) * R]: P_uniform[X, r], index x * R + r (X below L-1)
  std::vector<double> uniform_lower;  // [(L*H) * R]: P_uniform_lower[Y, r], index y * R + r

  double at(HeadRef y, HeadRef x, int r) const {
    const size_t n = static_cast<size_t>(layers) * heads;
    return values[((y.layer * heads + y.head) * n + x.layer * heads + x.head) * relations + r];
  }
  // 0 when the baseline was not measured (a PathMass built by hand without it).
  double baseline(HeadRef x, int r) const {
    const size_t k = static_cast<size_t>(x.layer * heads + x.head) * relations + r;
    return k < uniform.size() ? uniform[k] : 0.0;
  }
  // P_uniform_lower[Y, r]; 0 when not measured.
  double lower_baseline(HeadRef y, int r) const {
    const size_t k = static_cast<size_t>(y.layer * heads + y.head) * relations + r;
    return k < uniform_lower.size() ? uniform_lower[k] : 0.0;
  }
};

class PathMassAccumulator {
 public:
  // Throws headlab::Error unless layers, heads, relations > 0.
  PathMassAccumulator(int layers, int heads, int relations);
  // As HeadMetricsAccumulator::add (the same arguments and checks); key_padding as
  // ChanceBaselineAccumulator::add (empty: every key visible), for the uniform-Y baseline.
  void add(std::span<const Tensor> attention, std::span<const std::vector<int32_t>> partners,
           std::span<const uint8_t> counted, std::span<const uint8_t> key_padding = {});
  PathMass finish() const;

 private:
  void add_uniform(std::span<const Tensor> attention,
                   std::span<const std::vector<int32_t>> partners, std::span<const uint8_t> counted,
                   std::span<const uint8_t> key_padding, int64_t b, std::vector<double>& column);

  PathMass sum_;
  int64_t queries_ = 0;
  std::vector<int64_t> relation_queries_;  // [R]: counted queries with a partner for r
};

struct CompositionSource {
  HeadRef head;                     // X', in a layer below Y
  double path_mass = 0.0;           // P[Y, X', r]
  double ablated_mass = 0.0;        // M[Y, r] with X' gated off
  double path_mass_baseline = 0.0;  // P_uniform[X', r]
};

struct HeadComposition {
  HeadRef head;                           // Y
  int relation = -1;                      // r of Y's strongest path
  HeadRef composes_with;                  // X of that path
  double path_mass = 0.0;                 // P[Y, X, r]
  double path_mass_baseline = 0.0;        // P_uniform[X, r]
  double path_mass_lower_baseline = 0.0;  // P_uniform_lower[Y, r]
  // path_mass > max(path_mass_baseline, path_mass_lower_baseline) + kCompositionMargin
  bool claimed = false;
  double mass = 0.0;                       // M[Y, r]: Y alone, one step
  std::vector<CompositionSource> sources;  // every head of the layers below Y, layer-major
};

// base: masses with every head on; ablated[k]: with head k (= l * H + h, l < L - 1) gated off,
// one matrix per head of layers 0 .. L-2. One entry per head of layers 1 .. L-1 (none for one
// layer); ties go to the lowest (X, r). The strongest path is chosen by its mass, as before the
// baselines, and then claimed or not against its own baseline. Throws headlab::Error when the sizes disagree.
std::vector<HeadComposition> compositions(const HeadRelationMatrix& base, const PathMass& paths,
                                          const std::vector<HeadRelationMatrix>& ablated);

}  // namespace headlab
