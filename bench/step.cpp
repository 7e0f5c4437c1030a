// The training-step benchmark behind `headlab bench --preset` (see bench/step.h).

#include "bench/step.h"

#include <algorithm>
#include <span>
#include <vector>

#include "autograd/ops.h"
#include "bench/measure.h"
#include "core/error.h"
#include "core/kernels/kernels.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "core/threads.h"
#include "layers/encoder.h"
#include "optim/adam.h"
#include "train/dist/comm.h"
#include "train/dist/reduce.h"

namespace headlab::bench {
namespace {

using nlohmann::json;

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

}  // namespace

json run_step_bench(const StepBenchOptions& o, int threads_option, Comm* comm_option) {
  const Preset& p = find_preset(o.preset);
  LocalComm alone;
  Comm& comm = comm_option ? *comm_option : alone;
  const int64_t ranks = comm.size();
  if (p.batch % ranks != 0)
    fail("bench: preset {}'s batch of {} does not split over {} ranks", p.name, p.batch, ranks);
  const int threads = threads_option > 0 ? threads_option : 1;
  set_backend(parse_backend(o.backend));
  set_num_threads(threads);

  Rng init(static_cast<uint64_t>(o.seed));
  Encoder model(preset_encoder(p), init);
  const NamedParameters params = model.named_parameters();
  int64_t n_params = 0;
  for (const auto& np : params) n_params += np.var.numel();
  AdamOptions ao;
  ao.lr = 1e-3;
  Adam adam(params, ao);

  // A learnable task: the next token of a fixed random batch (cyclic), as the reference; each
  // rank keeps its rows of it.
  const int64_t T = p.seq, B = p.batch / ranks, first = comm.rank() * B;
  std::vector<int32_t> ids(static_cast<size_t>(p.batch * T)), targets(ids.size());
  Rng data(static_cast<uint64_t>(o.seed) + 1);
  for (auto& id : ids) id = static_cast<int32_t>(data.below(static_cast<uint64_t>(p.vocab)));
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t t = 0; t < T; ++t) targets[b * T + t] = ids[b * T + (t + 1) % T];
  ids.erase(ids.begin(), ids.begin() + first * T);
  ids.resize(static_cast<size_t>(B * T));
  targets.erase(targets.begin(), targets.begin() + first * T);
  targets.resize(ids.size());
  const std::span<const int32_t> feature(ids);

  std::vector<int64_t> sizes;
  std::vector<std::span<float>> grads;
  for (const auto& np : params) {
    np.var.grad() = Tensor::zeros(np.var.shape());
    sizes.push_back(np.var.numel());
    grads.emplace_back(np.var.grad().data(), static_cast<size_t>(np.var.numel()));
  }
  GradientReducer reduce(comm, 1, sizes);
  StepSubject subject;
  subject.train_step = [&] {
    adam.zero_grad();
    EncoderOutput out = model.forward({feature}, B, T);
    Var loss = cross_entropy(out.logits, targets);
    loss.backward();
    reduce.add(grads, B * T);
    reduce.finish(grads, p.batch * T);
    adam.step();
    return loss.value()[0];
  };
  if (ranks > 1) subject.reduce_seconds = [&] { return reduce.last_seconds(); };
  subject.forward = [&] { model.forward({feature}, B, T); };
  subject.set_training = [&](bool training) { training ? model.train() : model.eval(); };
  subject.forward_flops = forward_flops(p);
  model.train();
  json r = measure_steps(subject, {.warmup = o.warmup > 0 ? o.warmup : p.warmup,
                                   .steps = o.steps > 0 ? o.steps : p.steps,
                                   .threads = threads});
  const BlasInfo blas = blas_info();
  r.update({{"bench", "headlab_step"},
            {"preset", p.name},
            {"config", p.name},
            {"vocab", p.vocab},
            {"seq", p.seq},
            {"d_model", p.d_model},
            {"heads", p.heads},
            {"batch", p.batch},
            {"ranks", ranks},
            {"batch_per_rank", B},
            {"layers", p.layers},
            {"ffn_mult", kFfnMult},
            {"params", n_params},
            {"backend", backend_name(current_backend())},
            {"openblas_parallel", blas.parallel}});
  return r;
}

}  // namespace headlab::bench
