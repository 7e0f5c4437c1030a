#pragma once
// Iterative head pruning (Michel et al. 2019, "Are Sixteen Heads Really Better than One?",
// sec. 5): remove the least important head, recompute every remaining head's importance with
// the removed heads gated off, remove the next, until one head is left; record the accuracy
// after each removal. Importance is I_{l,h} = mean over batches |dL/dg_{l,h}| at the current
// gates, L2-normalised over the remaining heads of each layer (as Michel et al. normalise per
// layer), compared across layers; ties go to the lowest (layer, head).

#include <functional>
#include <span>
#include <vector>

#include "train/analysis/head_metrics.h"

namespace headlab {

// One point of the pruning curve: after removing `heads_pruned` heads, the last of which was
// `pruned` (invalid at heads_pruned = 0, the unpruned model).
struct PruningStep {
  int heads_pruned = 0;
  HeadRef pruned;
  LabelAccuracy accuracy;
};

// The importance of every head ([L * H], layer-major) with the heads in `gates` ([L][H], 0 =
// pruned) as given: raw |dL/dg| (normalised here).
using ImportanceFn = std::function<std::vector<double>(const std::vector<std::vector<float>>&)>;
// Accuracy with those gates.
using AccuracyFn = std::function<LabelAccuracy(const std::vector<std::vector<float>>&)>;

// The pruning curve over `layers` x `heads` heads: layers * heads entries, heads_pruned 0 ..
// layers * heads - 1. Throws headlab::Error unless layers, heads > 0 and importance returns
// layers * heads values.
std::vector<PruningStep> iterative_pruning(int layers, int heads, const ImportanceFn& importance,
                                           const AccuracyFn& accuracy);

// raw [L * H] divided by the L2 norm of its layer's entries where `keep` is set ([L * H]; all
// when empty); entries not kept, and layers of norm 0, give 0.
std::vector<double> normalise_per_layer(std::span<const double> raw, int layers, int heads,
                                        std::span<const uint8_t> keep = {});

}  // namespace headlab
