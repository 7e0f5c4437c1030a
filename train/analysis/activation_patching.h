#pragma once
// Activation patching of every head and of the residual stream (patching.h holds the metric's
// arithmetic), through the hook points. For each relation r and evaluation batch, the task makes
// a corrupted copy in which r's partner of some tokens changes and their label with it
// (Task::corrupt); the clean batch is run once with every layer's hook_z and residual points
// cached (once for all relations), the corrupted batch once with the same points cached, and
// then once per site with that site's clean value edited in:
//   head (l, h)          blocks.l.attn.hook_z, head h's slice            ([.., h, :] of [B, T, h, d])
//   residual, source     blocks.l.hook_resid_pre (and the last block's hook_resid_post) at the
//                        positions whose input the corruption changed
//   residual, destination the same points at the measured tokens
// Each site's number is the fraction of the clean-minus-corrupted logit difference it restores.
// A head that carries r's partner into the residual stream restores r's difference; a head that
// merely attends to the partner, and whose output the model does not read, restores none.
//
// Direct logit attribution, on the same clean runs and measured tokens: head (l, h)'s output
// c = W_o[:, h] z_h, carried straight to the classifier along the residual stream (pre-norm: no
// norm on the way but the final one, whose scale 1/sigma is frozen at its value on that token),
//   DLA = (c - mean(c)) . (gain * (W_c[clean label] - W_c[corrupted label]) / sigma),
// the head's own share of the clean run's logit difference; the shares of all heads, the
// embeddings and the feed-forward blocks add up to that difference less the classifier's and the
// final norm's biases. Post-norm models (a norm after every block) and final norms other than
// layer_norm get none, with the reason.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace headlab {

class Task;

// One residual-stream point's two patches, per relation.
struct ResidualPatching {
  std::string hook;                                // "blocks.0.hook_resid_pre"
  std::vector<std::optional<double>> source;       // [R]
  std::vector<std::optional<double>> destination;  // [R]
};

struct PatchingMap {
  bool available = false;       // false: the task makes no corrupted copies (Task::corrupt)
  uint64_t seed = 0;            // the corruptions' seed
  std::vector<int64_t> tokens;  // [R] measured tokens over the set
  std::vector<double> clean, corrupted;                   // [R] mean logit differences
  std::vector<std::vector<std::optional<double>>> heads;  // [R][L * H] restored, layer-major
  std::vector<ResidualPatching> residual;  // blocks' inputs, then the last block's output
  // Direct logit attribution [R][L * H], mean over the measured tokens; empty with the reason.
  std::vector<std::vector<double>> direct;
  std::string direct_unavailable;
};

namespace analysis_detail {

class AnalysisHooks;
struct EvalSet;

// The map above over the set, with the model's gates at ones; relations [R]. With `starts`,
// each patched run starts at the corrupted run's values in the patched site's block
// (Hooks::start_at), and a residual patch whose value is the clean one takes the clean run's
// numbers; without, each runs whole: the same numbers.
PatchingMap activation_patching(AnalysisHooks& hooks, const Task& task, const EvalSet& set,
                                int relations, uint64_t seed, bool starts = true);

}  // namespace analysis_detail
}  // namespace headlab
