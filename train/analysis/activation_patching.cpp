#include "train/analysis/activation_patching.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include "autograd/grad_mode.h"
#include "autograd/ops.h"

#include "layers/encoder.h"
#include "layers/hooks.h"
#include "layers/layer_norm.h"
#include "train/analysis/eval_set.h"
#include "train/analysis/head_gates.h"
#include "train/analysis/patching.h"
#include "train/tasks/task.h"

namespace headlab {
namespace analysis_detail {
namespace {

std::vector<std::string> residual_points(int64_t layers) {
  std::vector<std::string> points = block_points(layers, "hook_resid_pre");
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

// Whether a [B, T, D] value and b differ only at positions where mask [B, T, 1] is 1, bit for
// bit elsewhere (-0 against +0 counts as a difference).
bool differs_only_inside(const Tensor& a, const Tensor& b, const Tensor& mask) {
  const int64_t rows = mask.numel(), width = a.numel() / rows;
  for (int64_t i = 0; i < rows; ++i)
    if (mask[i] == 0.0f &&
        std::memcmp(a.data() + i * width, b.data() + i * width, width * sizeof(float)) != 0)
      return false;
  return true;
}

// The weights on a head's direct path to the logits (see the header); `why` says why not.
struct DirectPath {
  std::string why;
  std::vector<Tensor> w_o;  // per layer [D, h d]
  Tensor gain;              // [D]; ones without affine
  float eps = 0;
  Tensor classifier;  // [C, D]
};

DirectPath direct_path(Encoder& model) {
  DirectPath p;
  if (model.options().norm != NormPosition::pre) {
    p.why = "post-norm: every block's norm lies on the direct path";
    return p;
  }
  const LayerNorm* norm = nullptr;
  const Linear* classifier = nullptr;
  for (const auto& [name, child] : model.named_children()) {
    if (name == "final_norm") norm = dynamic_cast<const LayerNorm*>(child);
    if (name == "classifier") classifier = dynamic_cast<const Linear*>(child);
  }
  if (!norm || !classifier) {
    p.why = "the final norm is not a layer_norm";
    return p;
  }
  for (int64_t l = 0; l < model.num_layers(); ++l)
    p.w_o.push_back(model.attention(l).w_o->weight.value());
  p.gain =
      norm->weight.defined() ? norm->weight.value() : Tensor::full({model.options().d_model}, 1.0f);
  p.eps = norm->options().eps;
  p.classifier = classifier->weight.value();
  return p;
}

// Adds each head's direct logit attribution summed over the measured tokens of one clean run:
// z[l] [B, T, h, d] and the final norm's input x [B, T, D].
void add_direct(const DirectPath& p, const std::vector<Tensor>& z, const Tensor& x,
                const Batch& clean, const Batch& corrupted, const std::vector<uint8_t>& measured,
                std::vector<double>& sums) {
  const int64_t D = x.size(2), L = static_cast<int64_t>(z.size());
  std::vector<double> v(static_cast<size_t>(D));
  for (int64_t i = 0; i < clean.tokens(); ++i) {
    if (!measured[static_cast<size_t>(i)]) continue;
    const float* xi = x.data() + i * D;
    double mean = 0, var = 0;
    for (int64_t k = 0; k < D; ++k) mean += xi[k];
    mean /= static_cast<double>(D);
    for (int64_t k = 0; k < D; ++k) var += (xi[k] - mean) * (xi[k] - mean);
    const double sigma = std::sqrt(var / static_cast<double>(D) + p.eps);
    const float* wy = p.classifier.data() + int64_t{clean.labels[static_cast<size_t>(i)]} * D;
    const float* wc = p.classifier.data() + int64_t{corrupted.labels[static_cast<size_t>(i)]} * D;
    double v_sum = 0;
    for (int64_t k = 0; k < D; ++k) {
      v[static_cast<size_t>(k)] = p.gain[k] * (double{wy[k]} - wc[k]) / sigma;
      v_sum += v[static_cast<size_t>(k)];
    }
    for (int64_t l = 0; l < L; ++l) {
      const Tensor& zl = z[static_cast<size_t>(l)];
      const int64_t H = zl.size(2), d = zl.size(3);
      const float* zi = zl.data() + i * H * d;
      const float* w = p.w_o[static_cast<size_t>(l)].data();  // [D, H d]
      for (int64_t h = 0; h < H; ++h) {
        double dot = 0, c_sum = 0;  // c . v and sum(c), c = W_o[:, h block] z_h
        for (int64_t k = 0; k < D; ++k) {
          double c = 0;
          for (int64_t j = 0; j < d; ++j) c += double{w[k * H * d + h * d + j]} * zi[h * d + j];
          dot += c * v[static_cast<size_t>(k)];
          c_sum += c;
        }
        sums[static_cast<size_t>(l * H + h)] += dot - c_sum / static_cast<double>(D) * v_sum;
      }
    }
  }
}

// The corrupted batch's logits with the hooks as they are.
Tensor logits_of(Encoder& model, const Batch& b) {
  std::vector<std::span<const int32_t>> features;
  b.feature_spans(features);
  return model.forward(features, b.batch_size, b.seq_len).logits.value();
}

}  // namespace

PatchingMap activation_patching(AnalysisHooks& hooks, const Task& task, const EvalSet& set,
                                int relations, uint64_t seed, bool starts) {
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
  std::vector<std::string> cached = block_points(L, "attn.hook_z");
  cached.insert(cached.end(), residual.begin(), residual.end());
  const DirectPath direct = direct_path(model);
  map.direct_unavailable = direct.why;
  std::vector<std::vector<double>> direct_sums(
      static_cast<size_t>(relations), std::vector<double>(static_cast<size_t>(heads), 0.0));
  // Every site's value in one run of `b` (copied: the cache ends with this scope), and its
  // logits (copied too: the next forward may reuse their buffer).
  const auto run_keeping = [&](const Batch& b, Tensor& logits) {
    const CachedPoints sites(h, cached);
    logits = logits_of(model, b).clone();
    std::vector<Tensor> values;
    for (const Tensor& v : sites.values()) values.push_back(v.clone());
    return values;
  };
  Batch corrupted;
  std::vector<uint8_t> measured;
  for (const Batch& clean : set.batches) {
    Tensor clean_logits, corrupted_logits;
    const std::vector<Tensor> values = run_keeping(clean, clean_logits);  // for every relation
    for (int r = 0; r < relations; ++r) {
      task.corrupt(clean, r, seed, corrupted, measured);
      const LogitDifference ld_clean =
          logit_difference(clean_logits, clean.labels, corrupted.labels, measured);
      if (direct.why.empty())
        add_direct(direct, std::vector<Tensor>(values.begin(), values.begin() + L), values.back(),
                   clean, corrupted, measured, direct_sums[static_cast<size_t>(r)]);
      const std::vector<Tensor> corrupt_values = run_keeping(corrupted, corrupted_logits);
      const LogitDifference ld_corrupted =
          logit_difference(corrupted_logits, clean.labels, corrupted.labels, measured);
      // The corrupted run with `point`'s clean value edited in where `mask` is 1, started at
      // the corrupted run's values at the sites `from` (indices into `cached`; Hooks::start_at):
      // the same logits as the whole run, without what comes before them.
      const auto patched = [&](const std::string& point, const Tensor& mask, const Tensor& value,
                               std::initializer_list<size_t> from) {
        if (starts)
          for (size_t site : from) h.start_at(cached[site], corrupt_values[site]);
        h.edit(point, [mask, value](const Var& x) { return where(mask, Var(value), x); });
        const LogitDifference ld =
            logit_difference(logits_of(model, corrupted), clean.labels, corrupted.labels, measured);
        h.remove_edit(point);
        h.clear_starts();
        return ld;
      };
      for (int64_t l = 0; l < L; ++l)
        for (int64_t head = 0; head < H; ++head) {
          // From block l's input and heads' outputs.
          const size_t z = static_cast<size_t>(l), input = static_cast<size_t>(L + l);
          head_acc.add(r, static_cast<int>(l * H + head), ld_clean, ld_corrupted,
                       patched(cached[z], head_mask(H, head), values[z], {input, z}));
        }
      const Tensor source = changed_positions(clean, corrupted);
      const Tensor destination = measured_positions(clean, measured);
      for (int p = 0; p < points; ++p) {
        // Block p's input, or for p = L the last block's output: each starts at its own point.
        const size_t site = static_cast<size_t>(L + p);
        for (const Tensor* mask : {&source, &destination}) {
          // Where the patched value is the clean one (the corrupted run differs only inside
          // the mask, as at the embeddings for `source`), the run from there is the clean run.
          const LogitDifference ld =
              starts && differs_only_inside(values[site], corrupt_values[site], *mask)
                  ? ld_clean
                  : patched(residual[p], *mask, values[site], {site});
          (mask == &source ? source_acc : dest_acc).add(r, p, ld_clean, ld_corrupted, ld);
        }
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
    if (direct.why.empty()) {
      std::vector<double> means = direct_sums[static_cast<size_t>(r)];
      for (double& m : means) m /= static_cast<double>(std::max<int64_t>(t.tokens, 1));
      map.direct.push_back(std::move(means));
    }
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
