#pragma once
// Iterative head pruning (Michel et al. 2019, "Are Sixteen Heads Really Better than One?",
// sec. 5): remove the least important head, recompute every remaining head's importance with
// the removed heads gated off, remove the next, until one head is left; record the accuracy
// after each removal. Importance is I_{l,h} = mean over batches |dL/dg_{l,h}| at the current
// gates, L2-normalised over the remaining heads of each layer (as Michel et al. normalise per
// layer), compared across layers; ties go to the lowest (layer, head).
//
// The importance measure is train.pruning_importance (PruningImportance below); the removal and
// the order of the loop are the same for every measure, so their curves compare head for head.

#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "train/analysis/head_metrics.h"

namespace headlab {

// What ranks the heads for removal (docs/analysis.md, "Pruning"):
//   gradient       |dL/dg| at the current gates, L2-normalised per layer (Michel et al.), the
//                  pruned heads' outputs set to 0;
//   mean_ablation  the rise in the evaluation loss when the head's output is replaced by its
//                  mean output over the evaluation tokens, with the pruned heads replaced by
//                  theirs too (the curve is then one of mean-ablated heads), recomputed after
//                  each removal, not normalised (a loss difference is comparable across layers);
//   patching       the sum over relations of |restored| of the unpruned model's activation
//                  patching (activation_patching.h), one ranking for the whole curve (patching
//                  edits the hook point the pruning gates act at), the pruned heads' outputs 0.
enum class PruningImportance { gradient, mean_ablation, patching };
// "gradient", "mean_ablation", "patching"; throws headlab::Error naming the choices otherwise.
PruningImportance pruning_importance_from_name(std::string_view name);
std::string pruning_importance_name(PruningImportance measure);

// One point of the pruning curve: after removing `heads_pruned` heads, the last of which was
// `pruned` (invalid at heads_pruned = 0, the unpruned model).
struct PruningStep {
  int heads_pruned = 0;
  HeadRef pruned;
  LabelAccuracy accuracy;
};

// What is measured with the heads in `gates` ([L][H], 0 = pruned) as given: the accuracy and,
// when asked, every head's raw importance |dL/dg| ([L * H], layer-major; normalised here). Both
// come from the same forward passes, so a step that needs both pays for one pass over the
// evaluation set, not two.
struct GateMeasure {
  LabelAccuracy accuracy;
  std::vector<double> importance;  // empty when not asked
};
using MeasureFn =
    std::function<GateMeasure(const std::vector<std::vector<float>>& gates, bool importance)>;

// The pruning curve over `layers` x `heads` heads: layers * heads entries, heads_pruned 0 ..
// layers * heads - 1. `unpruned` is the full model's measure (the analysis has it already);
// `measure` is called once per removal, asking for importance except after the last. With
// normalise (the gradient measure) the importances are compared after normalise_per_layer,
// else as given. Throws headlab::Error unless layers, heads > 0 and every importance has
// layers * heads values.
std::vector<PruningStep> iterative_pruning(int layers, int heads, const GateMeasure& unpruned,
                                           const MeasureFn& measure, bool normalise = true);

struct PatchingMap;
// Per head (layer-major, `heads` = L * H entries) the sum over relations of |restored| of the
// map (an undefined entry counts 0); all 0 when the map is not available.
std::vector<double> patching_importance(const PatchingMap& map, int heads);

// raw [L * H] divided by the L2 norm of its layer's entries where `keep` is set ([L * H]; all
// when empty); entries not kept, and layers of norm 0, give 0.
std::vector<double> normalise_per_layer(std::span<const double> raw, int layers, int heads,
                                        std::span<const uint8_t> keep = {});

}  // namespace headlab
