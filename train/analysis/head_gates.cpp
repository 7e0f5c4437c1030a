#include "train/analysis/head_gates.h"

#include <algorithm>
#include <string>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "core/error.h"
#include "layers/encoder.h"
#include "train/analysis/eval_set.h"
#include "train/tasks/task.h"

namespace headlab::analysis_detail {

AnalysisHooks::AnalysisHooks(Encoder& model) : model_(model), heads_(model.options().heads) {
  for (int64_t l = 0; l < model.num_layers(); ++l)
    gates_.emplace_back(Tensor::full({heads_}, 1.0f), false);
  attached_ = std::make_unique<HookGuard>(model, hooks_);
}

void AnalysisHooks::check_points(const Batch& batch) {
  NoGradGuard no_grad;
  {
    // Asked for so that the layer passes them even on its fastest path; seen() then tells.
    const CachedPoints pattern(hooks_, block_points(layers(), "attn.hook_pattern"));
    std::vector<std::span<const int32_t>> features;
    batch.feature_spans(features);
    model_.forward(features, batch.batch_size, batch.seq_len);
    const std::vector<std::string>& seen = hooks_.seen();
    for (int64_t l = 0; l < layers(); ++l) {
      std::string missing;
      for (const char* point : {"attn.hook_pattern", "attn.hook_z"}) {
        const std::string name = block_hook(l, point);
        if (std::find(seen.begin(), seen.end(), name) == seen.end())
          missing += (missing.empty() ? "" : " and ") + name;
      }
      if (!missing.empty())
        fail(
            "analyze: layer {}'s attention '{}' does not pass its values through {}: the head "
            "analysis reads the pattern and edits the heads' outputs there (keep "
            "MultiHeadAttention's forward, or call hook(\"hook_pattern\", ...) and "
            "hook_heads(\"hook_z\", ...) in yours: layers/multi_head_attention.h)",
            l, model_.options().attention_layer.name, missing);
    }
  }
}

void AnalysisHooks::set(const Gates& gates) {
  if (static_cast<int64_t>(gates.size()) != layers())
    fail("analyze: {} layers of gates for a model of {} layers", gates.size(), layers());
  for (size_t l = 0; l < gates.size(); ++l) {
    if (static_cast<int64_t>(gates[l].size()) != heads_)
      fail("analyze: layer {} has {} gates for {} heads", l, gates[l].size(), heads_);
    float* g = gates_[l].value().data();
    for (int64_t h = 0; h < heads_; ++h) g[h] = gates[l][static_cast<size_t>(h)];
  }
  update_edits();
}

void AnalysisHooks::reset() {
  for (Var& g : gates_) {
    g.value().fill_(1.0f);
    g.set_requires_grad(false);
    g.clear_grad();
  }
  ablation_ = Ablation::zero;
  update_edits();
}

void AnalysisHooks::require_grad(bool on) {
  for (Var& g : gates_) g.set_requires_grad(on);
  update_edits();
}

void AnalysisHooks::set_ablation(Ablation ablation) {
  if (ablation == Ablation::mean && means_.empty())
    fail("analyze: mean ablation before the heads' mean outputs are measured");
  ablation_ = ablation;
  update_edits();
}

void AnalysisHooks::set_means(std::vector<Tensor> means) {
  if (static_cast<int64_t>(means.size()) != layers())
    fail("analyze: {} layers of mean outputs for a model of {} layers", means.size(), layers());
  means_ = std::move(means);
  update_edits();
}

// One edit per layer whose gate is not all ones or needs a gradient; none elsewhere, so an
// ungated layer runs as without hooks.
void AnalysisHooks::update_edits() {
  gated_layers_ = 0;
  lowest_gated_ = layers();
  for (int64_t l = 0; l < layers(); ++l) {
    const std::string name = block_hook(l, "attn.hook_z");
    const Var& gate = gates_[static_cast<size_t>(l)];
    bool identity = !gate.requires_grad();
    for (float g : gate.value().span()) identity = identity && g == 1.0f;
    if (identity) {
      hooks_.remove_edit(name);
      continue;
    }
    ++gated_layers_;
    lowest_gated_ = std::min(lowest_gated_, l);
    Tensor offset;  // [h d]: (1 - g_i) m_i, for mean ablation
    if (ablation_ == Ablation::mean) {
      const Tensor& m = means_[static_cast<size_t>(l)];
      offset = m.clone();
      const int64_t d = m.numel() / heads_;
      const float* g = gate.value().data();
      float* o = offset.data();
      for (int64_t i = 0; i < heads_; ++i)
        for (int64_t k = 0; k < d; ++k) o[i * d + k] *= 1.0f - g[i];
    }
    hooks_.edit(name, [gate, offset](const Var& z) {  // z [B, T, h, d]
      const Shape shape = z.shape();
      Var merged = head_gate_merged(reshape(z, {shape[0], shape[1], shape[2] * shape[3]}), gate);
      if (offset.defined()) merged = add(merged, Var(offset));
      return reshape(merged, shape);
    });
  }
}

void AnalysisHooks::keep_starts(const EvalSet& set) {
  if (gated_layers_ != 0 || hooks_.edit_count() != 0)
    fail("analyze: starts kept with gates or edits set (they must be the ungated run's)");
  NoGradGuard no_grad;
  kept_set_ = nullptr;
  kept_input_.clear();
  kept_z_.clear();
  const std::vector<std::string> inputs = block_points(layers(), "hook_resid_pre");
  std::vector<std::string> points = block_points(layers(), "attn.hook_z");
  points.insert(points.begin(), inputs.begin(), inputs.end());
  const CachedPoints cached(hooks_, points);
  std::vector<std::span<const int32_t>> features;
  size_t bytes = 0;
  for (const Batch& b : set.batches) {
    b.feature_spans(features);
    hooks_.forget();
    model_.forward(features, b.batch_size, b.seq_len);
    std::vector<Tensor> input, z;
    for (int64_t l = 0; l < layers(); ++l) {
      input.push_back(cached[static_cast<size_t>(l)].clone());
      z.push_back(cached[static_cast<size_t>(layers() + l)].clone());
      bytes += (input.back().numel() + z.back().numel()) * sizeof(float);
    }
    if (bytes > kStartBudgetBytes) {  // too large to keep: forwards run whole
      kept_input_.clear();
      kept_z_.clear();
      return;
    }
    kept_input_.push_back(std::move(input));
    kept_z_.push_back(std::move(z));
  }
  kept_set_ = &set;
}

const Tensor* AnalysisHooks::kept_z(const EvalSet& set, size_t k, int64_t layer) const {
  if (kept_set_ != &set || k >= kept_z_.size()) return nullptr;
  return &kept_z_[k][static_cast<size_t>(layer)];
}

void AnalysisHooks::start_batch(const EvalSet& set, size_t k) {
  hooks_.clear_starts();
  // Another edit than the gates' may act before the lowest gate (activation patching's).
  if (kept_set_ != &set || k >= kept_z_.size() || gated_layers_ == 0 ||
      hooks_.edit_count() != static_cast<size_t>(gated_layers_))
    return;
  const size_t l = static_cast<size_t>(lowest_gated_);
  hooks_.start_at(block_hook(lowest_gated_, "hook_resid_pre"), kept_input_[k][l]);
  hooks_.start_at(block_hook(lowest_gated_, "attn.hook_z"), kept_z_[k][l]);
}

CachedPoints::CachedPoints(Hooks& hooks, std::vector<std::string> points)
    : hooks_(hooks), points_(std::move(points)) {
  for (const std::string& p : points_) hooks_.cache(p);
}

CachedPoints::~CachedPoints() {
  for (const std::string& p : points_) hooks_.uncache(p);
  hooks_.forget();
}

std::vector<Tensor> CachedPoints::values() const {
  std::vector<Tensor> out;
  for (size_t k = 0; k < points_.size(); ++k) out.push_back((*this)[k]);
  return out;
}

std::vector<std::string> block_points(int64_t layers, std::string_view point) {
  std::vector<std::string> out;
  for (int64_t l = 0; l < layers; ++l) out.push_back(block_hook(l, point));
  return out;
}

}  // namespace headlab::analysis_detail
