// The preset workloads of `headlab bench --preset` (see bench/step.h): the PyTorch reference's
// encoder, step and data.

#include <span>
#include <vector>

#include "autograd/ops.h"
#include "bench/step.h"
#include "core/error.h"
#include "core/kernels/kernels.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "core/threads.h"
#include "layers/encoder.h"
#include "optim/adam.h"

namespace headlab::bench {
namespace {

using nlohmann::json;

struct Preset {
  const char* name;
  int64_t vocab, seq, d_model, heads, batch, layers;
  int warmup, steps;
};

// As CONFIGS in torch_reference.py; warm-up and step counts keep each run to seconds.
constexpr Preset kPresets[] = {
    {"S", 32, 16, 64, 4, 64, 2, 20, 200},
    {"M", 32, 32, 128, 8, 64, 2, 10, 100},
    {"L", 32, 64, 256, 8, 32, 4, 5, 20},
};
constexpr int64_t kFfnMult = 4;

const Preset& find_preset(const std::string& name) {
  for (const Preset& p : kPresets)
    if (name == p.name) return p;
  fail("bench: unknown preset '{}' (known: S, M, L)", name);
}

// The reference's analytic matmul FLOPs of one forward pass (a multiply-add is 2 FLOPs); its
// training step counts 3x (backward ~ 2x forward).
double forward_flops(const Preset& p) {
  const double n = static_cast<double>(p.batch * p.seq), d = static_cast<double>(p.d_model);
  const double per_layer =
      2 * n * d * d * 4 + 2 * n * static_cast<double>(p.seq) * d * 2 + 2 * n * d * kFfnMult * d * 2;
  return static_cast<double>(p.layers) * per_layer + 2 * n * d * static_cast<double>(p.vocab);
}

// The reference's encoder (see the top of bench/step.h).
EncoderOptions preset_encoder(const Preset& p) {
  EncoderOptions eo;
  eo.vocab_sizes = {p.vocab};
  eo.max_len = p.seq;
  eo.d_model = p.d_model;
  eo.heads = p.heads;
  eo.layers = p.layers;
  eo.d_ff = kFfnMult * p.d_model;
  eo.num_classes = p.vocab;
  eo.activation = Activation::relu;
  eo.norm = NormPosition::post;
  eo.positions = PositionKind::learned;
  eo.embed_init_std = 1.0f;  // nn.Embedding
  eo.pos_init_std = 0.02f;   // torch.randn(T, D) * 0.02
  eo.dropout = 0.0f;
  eo.attn_dropout = 0.0f;
  return eo;
}

// The model, its optimizer and a learnable task: the next token of a fixed random batch
// (cyclic), as the reference.
struct PresetState {
  PresetState(const Preset& p, int seed)
      : init(static_cast<uint64_t>(seed)),
        model(preset_encoder(p), init),
        adam(model.named_parameters(), [] {
          AdamOptions ao;
          ao.lr = 1e-3;
          return ao;
        }()) {
    const int64_t B = p.batch, T = p.seq;
    ids.resize(static_cast<size_t>(B * T));
    targets.resize(ids.size());
    Rng data(static_cast<uint64_t>(seed) + 1);
    for (auto& id : ids) id = static_cast<int32_t>(data.below(static_cast<uint64_t>(p.vocab)));
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t) targets[b * T + t] = ids[b * T + (t + 1) % T];
  }
  Rng init;
  Encoder model;
  Adam adam;
  std::vector<int32_t> ids, targets;
};

}  // namespace

Workload preset_workload(const StepBenchOptions& o, int threads_option) {
  const Preset& p = find_preset(o.preset);
  const int threads = threads_option > 0 ? threads_option : 1;
  set_backend(parse_backend(o.backend.empty() ? "auto" : o.backend));
  set_num_threads(threads);

  auto state = std::make_shared<PresetState>(p, o.seed);
  PresetState& s = *state;
  int64_t n_params = 0;
  for (const auto& np : s.model.named_parameters()) n_params += np.var.numel();
  const int64_t B = p.batch, T = p.seq;
  const std::span<const int32_t> feature(s.ids);

  Workload w;
  w.state = state;
  w.warmup = p.warmup;
  w.steps = p.steps;
  w.subject.train_step = [&s, feature, B, T] {
    s.adam.zero_grad();
    EncoderOutput out = s.model.forward({feature}, B, T);
    Var loss = cross_entropy(out.logits, s.targets);
    loss.backward();
    s.adam.step();
    return loss.value()[0];
  };
  w.subject.forward = [&s, feature, B, T] { s.model.forward({feature}, B, T); };
  w.subject.set_training = [&s](bool training) { training ? s.model.train() : s.model.eval(); };
  w.subject.forward_flops = forward_flops(p);
  s.model.train();
  w.description = {{"bench", "headlab_step"}, {"preset", p.name},   {"config", p.name},
                   {"vocab", p.vocab},        {"seq", p.seq},       {"d_model", p.d_model},
                   {"heads", p.heads},        {"batch", p.batch},   {"layers", p.layers},
                   {"ffn_mult", kFfnMult},    {"params", n_params}, {"threads", threads}};
  return w;
}

}  // namespace headlab::bench
