#include "train/analysis/pruning.h"

#include <cmath>

#include "core/error.h"
#include "train/analysis/activation_patching.h"

namespace headlab {

std::vector<double> normalise_per_layer(std::span<const double> raw, int layers, int heads,
                                        std::span<const uint8_t> keep) {
  const size_t H = static_cast<size_t>(heads);
  std::vector<double> out(raw.size(), 0.0);
  for (size_t l = 0; l < static_cast<size_t>(layers); ++l) {
    double norm = 0.0;
    for (size_t h = 0; h < H; ++h)
      if (keep.empty() || keep[l * H + h]) norm += raw[l * H + h] * raw[l * H + h];
    norm = std::sqrt(norm);
    if (norm == 0.0) continue;
    for (size_t h = 0; h < H; ++h)
      if (keep.empty() || keep[l * H + h]) out[l * H + h] = raw[l * H + h] / norm;
  }
  return out;
}

PruningImportance pruning_importance_from_name(std::string_view name) {
  for (PruningImportance m :
       {PruningImportance::gradient, PruningImportance::mean_ablation, PruningImportance::patching})
    if (name == pruning_importance_name(m)) return m;
  fail("pruning: importance '{}' is not one of gradient, mean_ablation, patching", name);
}

std::string pruning_importance_name(PruningImportance measure) {
  switch (measure) {
    case PruningImportance::gradient:
      return "gradient";
    case PruningImportance::mean_ablation:
      return "mean_ablation";
    case PruningImportance::patching:
      return "patching";
  }
  return "gradient";
}

std::vector<double> patching_importance(const PatchingMap& map, int heads) {
  std::vector<double> out(static_cast<size_t>(heads), 0.0);
  if (!map.available) return out;
  for (const std::vector<std::optional<double>>& relation : map.heads) {
    if (static_cast<int>(relation.size()) != heads)
      fail("pruning: the patching map has {} heads but the model {}", relation.size(), heads);
    for (size_t k = 0; k < relation.size(); ++k)
      if (relation[k]) out[k] += std::abs(*relation[k]);
  }
  return out;
}

std::vector<PruningStep> iterative_pruning(int layers, int heads, const GateMeasure& unpruned,
                                           const MeasureFn& measure, bool normalise) {
  if (layers <= 0 || heads <= 0)
    fail("pruning: layers and heads must be positive but are {} and {}", layers, heads);
  const int N = layers * heads;
  std::vector<std::vector<float>> gates(layers, std::vector<float>(heads, 1.0f));
  std::vector<uint8_t> alive(static_cast<size_t>(N), 1);
  std::vector<PruningStep> curve = {{0, HeadRef{}, unpruned.accuracy}};
  GateMeasure now = unpruned;
  for (int k = 1; k < N; ++k) {
    if (static_cast<int>(now.importance.size()) != N)
      fail("pruning: importance gave {} values but there are {} heads", now.importance.size(), N);
    const std::vector<double> score =
        normalise ? normalise_per_layer(now.importance, layers, heads, alive) : now.importance;
    int weakest = -1;
    for (int i = 0; i < N; ++i)
      if (alive[i] && (weakest < 0 || score[i] < score[weakest])) weakest = i;
    alive[weakest] = 0;
    const HeadRef ref{weakest / heads, weakest % heads};
    gates[ref.layer][ref.head] = 0.0f;
    now = measure(gates, k + 1 < N);  // after the last removal no ranking is needed
    curve.push_back({k, ref, now.accuracy});
  }
  return curve;
}

}  // namespace headlab
