#include "train/analysis/activation_patching.h"

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "layers/encoder.h"
#include "layers/hooks.h"
#include "train/analysis/eval_set.h"
#include "train/analysis/head_gates.h"
#include "train/analysis/patching.h"
#include "train/tasks/task.h"

namespace headlab {
namespace analysis_detail {
namespace {

std::vector<std::string> residual_points(int64_t layers) {
  std::vector<std::string> points;
  for (int64_t l = 0; l < layers; ++l) points.push_back(block_hook(l, "hook_resid_pre"));
  if (layers > 0) points.push_back(block_hook(layers - 1, "hook_resid_post"));
  return points;
}

// [B, T, 1]: 1 at the positions where `a` and `b` differ in some feature (the corrupted input).
Tensor changed_positions(const Batch& a, const Batch& b) {
  Tensor mask = Tensor::zeros({a.batch_size, a.seq_len, 1});
  for (size_t f = 0; f < a.features.size(); ++f)
    for (int64_t i = 0; i < a.tokens(); ++i)
      if (a.features[f][static_cast<size_t>(i)] != b.features[f][static_cast<size_t>(i)])
        mask[i] = 1.0f;
  return mask;
}

Tensor measured_positions(const Batch& b, const std::vector<uint8_t>& measured) {
  Tensor mask = Tensor::zeros({b.batch_size, b.seq_len, 1});
  for (int64_t i = 0; i < b.tokens(); ++i) mask[i] = measured[static_cast<size_t>(i)] ? 1.0f : 0.0f;
  return mask;
}

// The corrupted batch's logits with the hooks as they are.
Tensor logits_of(Encoder& model, const Batch& b) {
  std::vector<std::span<const int32_t>> features;
  b.feature_spans(features);
  return model.forward(features, b.batch_size, b.seq_len).logits.value();
}

}  // namespace

PatchingMap activation_patching(AnalysisHooks& hooks, const Task& task, const EvalSet& set,
                                int relations, uint64_t seed) {
  NoGradGuard no_grad;
  PatchingMap map;
  map.seed = seed;
  Encoder& model = hooks.model();
  Hooks& h = hooks.hooks();
  const int64_t L = model.num_layers(), H = model.options().heads;
  const std::vector<std::string> residual = residual_points(L);
  const int heads = static_cast<int>(L * H), points = static_cast<int>(residual.size());
  if (set.batches.empty() || heads == 0) return map;
  {  // Does the task corrupt at all?
    Batch probe;
    std::vector<uint8_t> measured;
    if (!task.corrupt(set.batches.front(), 0, seed, probe, measured)) return map;
  }
  map.available = true;
  PatchingAccumulator head_acc(relations, heads), source_acc(relations, std::max(points, 1)),
      dest_acc(relations, std::max(points, 1));
  std::vector<std::string> cached;
  for (int64_t l = 0; l < L; ++l) cached.push_back(block_hook(l, "attn.hook_z"));
  cached.insert(cached.end(), residual.begin(), residual.end());
  Batch corrupted;
  std::vector<uint8_t> measured;
  for (int r = 0; r < relations; ++r) {
    for (const Batch& clean : set.batches) {
      task.corrupt(clean, r, seed, corrupted, measured);
      // The clean run, every site's value kept.
      for (const std::string& p : cached) h.cache(p);
      h.forget();
      const LogitDifference ld_clean =
          logit_difference(logits_of(model, clean), clean.labels, corrupted.labels, measured);
      std::vector<Tensor> values;
      for (const std::string& p : cached) values.push_back(h.cached(p).value().clone());
      for (const std::string& p : cached) h.uncache(p);
      h.forget();
      const LogitDifference ld_corrupted =
          logit_difference(logits_of(model, corrupted), clean.labels, corrupted.labels, measured);
      const auto patched = [&](const std::string& point, const Tensor& mask, const Tensor& value) {
        h.edit(point, [mask, value](const Var& x) { return where(mask, Var(value), x); });
        const LogitDifference ld =
            logit_difference(logits_of(model, corrupted), clean.labels, corrupted.labels, measured);
        h.remove_edit(point);
        return ld;
      };
      for (int64_t l = 0; l < L; ++l)
        for (int64_t head = 0; head < H; ++head) {
          Tensor mask = Tensor::zeros({1, 1, H, 1});
          mask[head] = 1.0f;
          head_acc.add(
              r, static_cast<int>(l * H + head), ld_clean, ld_corrupted,
              patched(cached[static_cast<size_t>(l)], mask, values[static_cast<size_t>(l)]));
        }
      const Tensor source = changed_positions(clean, corrupted);
      const Tensor destination = measured_positions(clean, measured);
      for (int p = 0; p < points; ++p) {
        const Tensor& value = values[static_cast<size_t>(L + p)];
        source_acc.add(r, p, ld_clean, ld_corrupted, patched(residual[p], source, value));
        dest_acc.add(r, p, ld_clean, ld_corrupted, patched(residual[p], destination, value));
      }
    }
  }
  map.heads.resize(static_cast<size_t>(relations));
  for (int r = 0; r < relations; ++r) {
    const PatchingTotals& t = head_acc.totals(r, 0);
    map.tokens.push_back(t.tokens);
    map.clean.push_back(t.tokens ? t.clean / static_cast<double>(t.tokens) : 0.0);
    map.corrupted.push_back(t.tokens ? t.corrupted / static_cast<double>(t.tokens) : 0.0);
    for (int k = 0; k < heads; ++k)
      map.heads[static_cast<size_t>(r)].push_back(head_acc.restored(r, k));
  }
  for (int p = 0; p < points; ++p) {
    ResidualPatching rp{residual[static_cast<size_t>(p)], {}, {}};
    for (int r = 0; r < relations; ++r) {
      rp.source.push_back(source_acc.restored(r, p));
      rp.destination.push_back(dest_acc.restored(r, p));
    }
    map.residual.push_back(std::move(rp));
  }
  return map;
}

}  // namespace analysis_detail
}  // namespace headlab
