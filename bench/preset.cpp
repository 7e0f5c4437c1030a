// The preset workloads of `headlab bench --preset` (see bench/step.h): the PyTorch reference's
// encoder, step and data.

#include <chrono>
#include <span>
#include <unordered_map>
#include <vector>

#include "autograd/ops.h"
#include "autograd/tape.h"
#include "bench/step.h"
#include "core/error.h"
#include "core/kernels/kernels.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "core/threads.h"
#include "layers/encoder.h"
#include "optim/adam.h"
#include "train/distributed/comm.h"
#include "train/distributed/reduce.h"
#include "train/run/model.h"
#include "train/run/optimizer_shard.h"

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
// (cyclic), as the reference; with several ranks each keeps its rows [first, first + B) of it,
// and its gradients are reduced over the ranks as training reduces them.
struct PresetState {
  PresetState(const Preset& p, int seed, Comm* comm, int64_t B, int64_t first, bool sharded)
      : init(static_cast<uint64_t>(seed)),
        model(preset_encoder(p), init),
        adam(model.named_parameters(),
             [] {
               AdamOptions ao;
               ao.lr = 1e-3;
               return ao;
             }()),
        reduce(comm ? *comm : alone, 1, gradient_sizes(model)),
        shard(comm ? *comm : alone, adam, sharded) {
    const int64_t T = p.seq;
    ids.resize(static_cast<size_t>(p.batch * T));
    targets.resize(ids.size());
    Rng data(static_cast<uint64_t>(seed) + 1);
    for (auto& id : ids) id = static_cast<int32_t>(data.below(static_cast<uint64_t>(p.vocab)));
    for (int64_t b = 0; b < p.batch; ++b)
      for (int64_t t = 0; t < T; ++t) targets[b * T + t] = ids[b * T + (t + 1) % T];
    ids.erase(ids.begin(), ids.begin() + first * T);
    ids.resize(static_cast<size_t>(B * T));
    targets.erase(targets.begin(), targets.begin() + first * T);
    targets.resize(ids.size());
    for (const auto& np : model.named_parameters()) {
      np.var.grad() = Tensor::zeros(np.var.shape());
      index[np.var.node()] = grads.size();
      grads.emplace_back(np.var.grad().data(), static_cast<size_t>(np.var.numel()));
    }
    leaf_done = [this](const Var& leaf) {
      const auto it = index.find(leaf.node());
      if (it != index.end()) reduce.ready(it->second, grads[it->second]);
    };
  }
  static std::vector<int64_t> gradient_sizes(Encoder& model) {
    std::vector<int64_t> sizes;
    for (const auto& np : model.named_parameters()) sizes.push_back(np.var.numel());
    return sizes;
  }
  Rng init;
  Encoder model;
  Adam adam;
  LocalComm alone;  // the ranks when there is no comm
  GradientReducer reduce;
  OptimizerShard shard;
  std::vector<int32_t> ids, targets;
  std::vector<std::span<float>> grads;
  std::unordered_map<const void*, size_t> index;       // a parameter's node -> its buffer
  LeafDone leaf_done;                                  // the overlap's hook, as TrainStep's
  std::chrono::steady_clock::time_point reduce_began;  // this rank's backward ended
};

}  // namespace

std::vector<int64_t> preset_gradient_sizes(const std::string& name) {
  Rng init(0);
  Encoder model(preset_encoder(find_preset(name)), init);
  return PresetState::gradient_sizes(model);
}

Workload preset_workload(const StepBenchOptions& o, int threads_option) {
  const Preset& p = find_preset(o.preset);
  const int64_t ranks = o.comm ? o.comm->size() : 1;
  if (p.batch < ranks)
    fail("bench: preset {}'s batch of {} does not split over {} ranks", p.name, p.batch, ranks);
  const int threads = threads_option > 0 ? threads_option : 1;
  set_backend(parse_backend(o.backend.empty() ? "auto" : o.backend));
  {  // runtime.precision's rule (train/run/model.h), refusing bf16 in the same words
    Config c;
    c.runtime.backend = o.backend.empty() ? "auto" : o.backend;
    c.runtime.precision = o.precision.empty() ? "fp32" : o.precision;
    c.origins["runtime.precision"] = "--precision";
    set_precision(resolve_precision(c));
  }
  set_num_threads(threads);

  // Rank r takes rows [r batch / N, (r + 1) batch / N): an equal split where N divides the
  // batch, else one row more on some ranks (3 ranks of L's 32: 10, 11, 11).
  const int64_t rank = o.comm ? o.comm->rank() : 0, first = rank * p.batch / ranks;
  const int64_t B = (rank + 1) * p.batch / ranks - first, T = p.seq, global_tokens = p.batch * T;
  auto state = std::make_shared<PresetState>(p, o.seed, o.comm, B, first, o.shard_optimizer);
  PresetState& s = *state;
  int64_t n_params = 0;
  for (const auto& np : s.model.named_parameters()) n_params += np.var.numel();
  const std::span<const int32_t> feature(s.ids);

  Workload w;
  w.state = state;
  w.warmup = p.warmup;
  w.steps = p.steps;
  const bool overlap = o.overlap && s.reduce.overlaps();
  w.subject.train_step = [&s, feature, B, T, global_tokens, overlap] {
    s.adam.zero_grad();
    EncoderOutput out = s.model.forward({feature}, B, T);
    Var loss = cross_entropy(out.logits, s.targets);
    if (overlap) {  // as training reduces (train/run/step.cpp)
      s.reduce.begin_last(B * T);
      loss.tape()->backward(loss, nullptr, &s.leaf_done);
      s.reduce_began = std::chrono::steady_clock::now();
      s.reduce.end_last(s.grads);
    } else {
      loss.backward();
      s.reduce.add(s.grads, B * T);
      s.reduce_began = std::chrono::steady_clock::now();
    }
    s.reduce.finish(s.grads, global_tokens);
    s.adam.step();
    s.shard.broadcast_parameters();  // sharded: the owners' new values to every rank
    return loss.value()[0];
  };
  if (ranks > 1) {
    w.subject.reduce_seconds = [&s] { return s.reduce.last_seconds(); };
    w.subject.reduce_began = [&s] {
      return std::chrono::duration<double>(s.reduce_began.time_since_epoch()).count();
    };
  }
  w.subject.forward = [&s, feature, B, T] { s.model.forward({feature}, B, T); };
  w.subject.set_training = [&s](bool training) { training ? s.model.train() : s.model.eval(); };
  w.subject.forward_flops = forward_flops(p);
  s.model.train();
  w.description = {{"bench", "headlab_step"}, {"preset", p.name},   {"config", p.name},
                   {"vocab", p.vocab},        {"seq", p.seq},       {"d_model", p.d_model},
                   {"heads", p.heads},        {"batch", p.batch},   {"ranks", ranks},
                   {"batch_per_rank", B},     {"layers", p.layers}, {"ffn_mult", kFfnMult},
                   {"params", n_params},      {"threads", threads}};
  if (ranks > 1) {
    w.description["overlap"] = overlap;
    w.description["shard_optimizer"] = s.shard.active();
    const int64_t mine = s.shard.state_bytes_per_rank()[static_cast<size_t>(rank)];
    w.description["optimizer_state_bytes_per_rank"] = mine;
  }
  return w;
}

}  // namespace headlab::bench
