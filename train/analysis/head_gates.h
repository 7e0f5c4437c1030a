#pragma once
// Internal to the analysis: its hold on a model's heads, through the hook points
// (layers/hooks.h), not through one attention class's internals. Per layer a gate g [h] acts on
// the heads' outputs at blocks.L.attn.hook_z:
//   z'[.., i, :] = g_i z[.., i, :] + (1 - g_i) m_i
// with m_i = 0 (zero ablation, Michel et al. 2019) or head i's mean output over the evaluation
// set (mean ablation), so g_i = 0 replaces head i's output, g_i = 1 keeps it, and
// I_i = |dL/dg_i| at g = 1 is the gradient at that same point. Any attention layer that passes
// its heads through hook_z (MultiHeadAttention and its subclasses do; a plugin's own forward
// calls hook_heads) is ablated and scored correctly; AnalysisHooks refuses a model whose layers
// do not provide hook_pattern and hook_z.
//
// The gates start at ones and are applied only while some gate is not one or needs a gradient:
// the ungated model runs exactly as without the analysis (the fused attention, the same bits).
//
// A gate changes nothing before its layer's hook_z, so a gated forward of an evaluation batch
// computes again what the ungated one did up to there. keep_starts keeps, per batch, every
// block's input and heads' outputs from one ungated pass; start_batch then starts a gated
// forward at the lowest gated layer's two points (Hooks::start_at): the same numbers, bit for
// bit, without the embeddings, the blocks below and that layer's projections and softmax.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "autograd/var.h"
#include "layers/hooks.h"

namespace headlab {

class Encoder;
struct Batch;

namespace analysis_detail {

struct EvalSet;

enum class Ablation { zero, mean };

class AnalysisHooks {
 public:
  using Gates = std::vector<std::vector<float>>;

  // Attaches the analysis' hooks to `model` for this object's lifetime (HookGuard).
  explicit AnalysisHooks(Encoder& model);
  AnalysisHooks(const AnalysisHooks&) = delete;
  AnalysisHooks& operator=(const AnalysisHooks&) = delete;

  Encoder& model() { return model_; }
  Hooks& hooks() { return hooks_; }
  int64_t layers() const { return static_cast<int64_t>(gates_.size()); }
  int64_t heads() const { return heads_; }

  // Runs `batch` once with hook_pattern and hook_z asked for, and throws one line naming the
  // first layer (its index and registry name) whose attention provides neither or one of them.
  void check_points(const Batch& batch);

  // Gates [L][H]; throws on other sizes. reset(): ones, no gradient, zero ablation.
  void set(const Gates& gates);
  void reset();
  void require_grad(bool on);
  const Var& gate(int64_t layer) const { return gates_[static_cast<size_t>(layer)]; }
  // What a gate of 0 puts in a head's place. Mean ablation needs set_means first.
  void set_ablation(Ablation ablation);
  // Per layer the heads' mean outputs [h * d] (hook_z's last two dims, flattened).
  void set_means(std::vector<Tensor> means);
  bool has_means() const { return !means_.empty(); }

  // One ungated forward per batch of `set`, keeping blocks.L.hook_resid_pre and attn.hook_z of
  // every layer (within kStartBudgetBytes; beyond it nothing is kept and forwards run whole).
  // Needs the gates at ones and no edit set; `set` must outlive the kept values.
  void keep_starts(const EvalSet& set);
  // Layer l's kept heads' outputs for batch k of `set`, or null when none are kept for it.
  const Tensor* kept_z(const EvalSet& set, size_t k, int64_t layer) const;
  // Before batch k of `set` goes forward with the gates as set: starts at the lowest gated
  // layer's block input and heads' outputs, when values are kept for `set` and the only edits
  // are the gates'; else no start. clear_starts (StartsCleared) ends them.
  void start_batch(const EvalSet& set, size_t k);
  void clear_starts() { hooks_.clear_starts(); }
  static constexpr size_t kStartBudgetBytes = size_t{256} << 20;

 private:
  void update_edits();

  Encoder& model_;
  int64_t heads_ = 0;
  Hooks hooks_;
  std::unique_ptr<HookGuard> attached_;
  std::vector<Var> gates_;
  std::vector<Tensor> means_;
  Ablation ablation_ = Ablation::zero;
  int64_t gated_layers_ = 0, lowest_gated_ = 0;  // layers with a gate edit; the first of them
  const EvalSet* kept_set_ = nullptr;
  std::vector<std::vector<Tensor>> kept_input_, kept_z_;  // [batch][layer]
};

// Ends the starts of AnalysisHooks::start_batch at scope end, however the scope ends, so that no
// later forward (one that caches the points a start skips) starts anywhere.
class StartsCleared {
 public:
  explicit StartsCleared(AnalysisHooks& hooks) : hooks_(hooks) {}
  ~StartsCleared() { hooks_.clear_starts(); }
  StartsCleared(const StartsCleared&) = delete;
  StartsCleared& operator=(const StartsCleared&) = delete;

 private:
  AnalysisHooks& hooks_;
};

// Hook points cached for a scope: asked for at construction, their requests and values dropped
// at its end, so one pass's caches never reach the next pass's forwards.
class CachedPoints {
 public:
  CachedPoints(Hooks& hooks, std::vector<std::string> points);
  ~CachedPoints();
  CachedPoints(const CachedPoints&) = delete;
  CachedPoints& operator=(const CachedPoints&) = delete;

  // Before each forward: drops the last forward's values.
  void forget() { hooks_.forget(); }
  // Point k's value from the last forward, and all of them in order.
  const Tensor& operator[](size_t k) const { return hooks_.cached(points_[k]).value(); }
  std::vector<Tensor> values() const;
  size_t size() const { return points_.size(); }

 private:
  Hooks& hooks_;
  std::vector<std::string> points_;
};

// block_hook(l, point) for every layer l < layers.
std::vector<std::string> block_points(int64_t layers, std::string_view point);

}  // namespace analysis_detail
}  // namespace headlab
