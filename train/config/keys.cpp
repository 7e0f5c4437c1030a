// The key table: every config key, its member of Config, range or choices, and meaning. The
// defaults are not here: they are the member initialisers of the structs in
// train/config/config.h and optim/factory.h.

#include <algorithm>
#include <array>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "core/error.h"
#include "train/config/schema.h"

namespace headlab {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int64_t kMaxInt = std::numeric_limits<int64_t>::max();

// A fixed-length array of reals (optim.betas) is a real array of that length in the file.
template <class T>
struct is_real_array : std::false_type {};
template <size_t N>
struct is_real_array<std::array<double, N>> : std::true_type {};

template <class T>
constexpr KeyType type_of() {
  if constexpr (std::is_same_v<T, int64_t>)
    return KeyType::integer;
  else if constexpr (std::is_same_v<T, double>)
    return KeyType::real;
  else if constexpr (std::is_same_v<T, bool>)
    return KeyType::boolean;
  else if constexpr (std::is_same_v<T, std::string>)
    return KeyType::string;
  else if constexpr (std::is_same_v<T, std::vector<double>> || is_real_array<T>::value)
    return KeyType::real_array;
  else
    return KeyType::string_array;
}

// A fluent builder over one KeySpec, so the table below reads one key per statement.
struct Key {
  KeySpec s;
  Key& range(double lo, double hi, bool lo_open = false, bool hi_open = false) {
    s.lo = lo, s.hi = hi, s.lo_open = lo_open, s.hi_open = hi_open;
    return *this;
  }
  Key& length(size_t lo, size_t hi) {
    s.min_len = lo, s.max_len = hi;
    return *this;
  }
  Key& one_of(std::vector<std::string> choices) {
    s.choices = std::move(choices);
    return *this;
  }
  Key& shapes() {
    s.shape = true;
    return *this;
  }
  Key& required() {
    s.required = true;
    return *this;
  }
  Key& is(KeyClass identity) {
    s.identity = identity;
    return *this;
  }
  Key& doc(std::string text) {
    s.doc = std::move(text);
    return *this;
  }
};

template <class S, class T>
Key key_of(std::string key, S Config::*section, T S::*member) {
  Key k;
  k.s.key = std::move(key);
  k.s.type = type_of<T>();
  if constexpr (is_real_array<T>::value) {  // its length is checked before set (length())
    k.s.get = [section, member](const Config& c) -> ConfigValue {
      const T& a = (c.*section).*member;
      return std::vector<double>(a.begin(), a.end());
    };
    k.s.set = [section, member, key = k.s.key](Config& c, const ConfigValue& v) {
      const auto& values = std::get<std::vector<double>>(v);
      T& a = (c.*section).*member;
      if (values.size() != a.size())
        fail("{} has {} elements but expected {}", key, values.size(), a.size());
      std::copy(values.begin(), values.end(), a.begin());
    };
  } else {
    k.s.get = [section, member](const Config& c) -> ConfigValue { return (c.*section).*member; };
    k.s.set = [section, member](Config& c, const ConfigValue& v) {
      (c.*section).*member = std::get<T>(v);
    };
  }
  return k;
}

using C = Config;

// The keys of each config section, in the order configs/README.md lists them.
void model_keys(std::vector<Key>& k) {
  using M = ModelConfig;
  k.push_back(key_of("model.d_model", &C::model, &M::d_model)
                  .range(1, 8192)
                  .shapes()
                  .doc("Width of the residual stream (embedding size)."));
  k.push_back(key_of("model.heads", &C::model, &M::heads)
                  .range(1, 256)
                  .shapes()
                  .doc("Attention heads per layer."));
  k.push_back(key_of("model.head_dim", &C::model, &M::head_dim)
                  .range(0, 8192)
                  .shapes()
                  .doc("Width of each head; 0 means d_model / heads (heads must divide d_model)."));
  k.push_back(
      key_of("model.layers", &C::model, &M::layers).range(1, 256).shapes().doc("Encoder layers."));
  k.push_back(key_of("model.d_ff", &C::model, &M::d_ff)
                  .range(0, 65536)
                  .shapes()
                  .doc("Hidden width of the feed-forward block; 0: attention-only layers (no "
                       "feed-forward sublayer)."));
  k.push_back(key_of("model.causal", &C::model, &M::causal)
                  .doc("Causal self-attention: each position attends only to itself and the "
                       "positions before it."));
  k.push_back(key_of("model.activation", &C::model, &M::activation)
                  .one_of({"relu", "gelu"})
                  .doc("Feed-forward activation (GELU in its exact erf form)."));
  k.push_back(key_of("model.norm", &C::model, &M::norm)
                  .one_of({"pre", "post"})
                  .doc("LayerNorm placement: pre `x + f(LN(x))`, post `LN(x + f(x))`."));
  k.push_back(key_of("model.positions", &C::model, &M::positions)
                  .one_of({"learned", "sinusoidal"})
                  .shapes()
                  .doc("Position encoding: a learned table or fixed sinusoids."));
  k.push_back(key_of("model.embed_init_std", &C::model, &M::embed_init_std)
                  .range(0, 100, true)
                  .doc("Std of the N(0, std^2) init of the token feature embeddings."));
  k.push_back(key_of("model.pos_init_std", &C::model, &M::pos_init_std)
                  .range(0, 100, true)
                  .doc("Std of the N(0, std^2) init of learned positions."));
  k.push_back(key_of("model.dropout", &C::model, &M::dropout)
                  .range(0, 1, false, true)
                  .doc("Dropout on embeddings and sublayer outputs (training only)."));
  k.push_back(key_of("model.attn_dropout", &C::model, &M::attn_dropout)
                  .range(0, 1, false, true)
                  .doc("Dropout on the attention weights (inverted, training only)."));
  k.push_back(key_of("model.dropout_steps", &C::model, &M::dropout_steps)
                  .range(0, 1e9)
                  .doc("Early dropout: model.dropout and model.attn_dropout act in the first this "
                       "many training steps only, none after (Liu et al. 2023); 0: in every "
                       "step."));
  k.push_back(key_of("model.init", &C::model, &M::init)
                  .one_of({"default", "xavier_uniform"})
                  .doc("Init of Linear layers: PyTorch's U(+-1/sqrt(fan_in)), or Glorot's."));
  k.push_back(key_of("model.attention_layer", &C::model, &M::attention_layer)
                  .shapes()
                  .doc("Registry name of each layer's attention block; options in "
                       "`[model.attention_options]`."));
  k.push_back(key_of("model.ffn_layer", &C::model, &M::ffn_layer)
                  .shapes()
                  .doc("Registry name of each layer's feed-forward block; options in "
                       "`[model.ffn_options]`."));
  k.push_back(key_of("model.norm_layer", &C::model, &M::norm_layer)
                  .shapes()
                  .doc("Registry name of the norms (also the final norm); options in "
                       "`[model.norm_options]`."));
  k.push_back(key_of("model.positions_layer", &C::model, &M::positions_layer)
                  .shapes()
                  .doc("Registry name of the layer that adds positions to the embeddings "
                       "(it inherits `model.positions` as `kind`); options in "
                       "`[model.positions_options]`."));
}

void task_keys(std::vector<Key>& k) {
  using T = TaskConfig;
  // Any name here; the task registry (train/tasks/registry.h) decides, and the task reads the
  // table's other keys itself.
  k.push_back(key_of("task.name", &C::task, &T::name)
                  .shapes()
                  .required()
                  .doc("The task to train on (required)."));
}

void optim_keys(std::vector<Key>& k) {
  using O = OptimizerOptions;
  // Any name here; the optimizer registry (optim/registry.h) decides, with a plugin's too.
  k.push_back(key_of("optim.name", &C::optim, &O::name)
                  .shapes()
                  .doc("Optimizer: \"adam\", \"adamw\", \"sgd\" or a registered name (a "
                       "plugin's); its own options in `[optim.options]`."));
  k.push_back(
      key_of("optim.lr", &C::optim, &O::lr).range(0, kInf, true, true).doc("Peak learning rate."));
  k.push_back(key_of("optim.betas", &C::optim, &O::betas)
                  .length(2, 2)
                  .range(0, 1, false, true)
                  .doc("Adam's beta1, beta2."));
  k.push_back(
      key_of("optim.eps", &C::optim, &O::eps).range(0, kInf, true, true).doc("Adam's epsilon."));
  k.push_back(key_of("optim.weight_decay", &C::optim, &O::weight_decay)
                  .range(0, kInf, false, true)
                  .doc("Weight decay (decoupled for adamw, L2 for adam and sgd)."));
  k.push_back(key_of("optim.momentum", &C::optim, &O::momentum)
                  .range(0, 1, false, true)
                  .doc("SGD momentum (sgd only)."));
  k.push_back(key_of("optim.nesterov", &C::optim, &O::nesterov)
                  .doc("Nesterov momentum (sgd only; needs momentum > 0)."));
  k.push_back(key_of("optim.clip_norm", &C::optim, &O::clip_norm)
                  .range(0, kInf, false, true)
                  .doc("Clip gradients to this global L2 norm; 0 disables clipping."));
  k.push_back(key_of("optim.no_decay", &C::optim, &O::no_decay)
                  .length(0, 256)
                  .doc("Glob patterns over parameter names (`*`, `?`) exempt from weight decay, "
                       "e.g. `[\"*.bias\", \"*norm*\"]`; each must match a parameter. Learning-"
                       "rate scales by pattern are the table `[optim.lr_scale]`."));
}

void schedule_keys(std::vector<Key>& k) {
  using S = ScheduleOptions;
  // Any name here; the schedule registry (optim/schedule_registry.h) decides.
  k.push_back(key_of("schedule.name", &C::schedule, &S::name)
                  .doc("Learning-rate schedule: linear warmup, then constant, cosine decay to "
                       "min_lr at the last step, or inverse square root (\"constant\", "
                       "\"warmup_cosine\", \"warmup_inverse_sqrt\"); or a registered name (a "
                       "plugin's), its own options in `[schedule.options]`."));
  k.push_back(key_of("schedule.warmup_steps", &C::schedule, &S::warmup_steps)
                  .range(0, 1e9)
                  .doc("Steps of linear warmup from 0 to optim.lr."));
  k.push_back(key_of("schedule.min_lr", &C::schedule, &S::min_lr)
                  .range(0, kInf, false, true)
                  .doc("Floor of the cosine decay (reached at the last step)."));
  k.push_back(key_of("schedule.d_model", &C::schedule, &S::d_model)
                  .range(0, 65536)
                  .doc("warmup_inverse_sqrt only: 0 peaks at optim.lr; > 0 uses the Transformer "
                       "paper's lr * d_model^-0.5 * min(s^-0.5, s * warmup^-1.5)."));
}

void train_keys(std::vector<Key>& k) {
  using R = TrainConfig;
  k.push_back(key_of("train.steps", &C::train, &R::steps)
                  .range(1, 1e9)
                  .is(KeyClass::steps)
                  .doc("Optimizer steps."));
  k.push_back(key_of("train.batch_size", &C::train, &R::batch_size)
                  .range(1, 65536)
                  .is(KeyClass::batch)
                  .doc("Sentences per micro-batch (fresh every step); a step's global batch is "
                       "batch_size x grad_accum x ranks."));
  k.push_back(key_of("train.grad_accum", &C::train, &R::grad_accum)
                  .range(1, 65536)
                  .is(KeyClass::batch)
                  .doc("Micro-batches per step and rank whose gradients are summed before the "
                       "update (docs/distributed.md)."));
  k.push_back(key_of("train.seed", &C::train, &R::seed)
                  .range(0, double(kMaxInt))
                  .doc("Seed of initialisation, dropout and the training data stream."));
  k.push_back(key_of("train.eval_every", &C::train, &R::eval_every)
                  .range(0, 1e9)
                  .is(KeyClass::cadence)
                  .doc("Evaluate every this many steps; 0: only at the end."));
  k.push_back(key_of("train.eval_batches", &C::train, &R::eval_batches)
                  .range(1, 65536)
                  .is(KeyClass::eval)
                  .doc("Batches per evaluation."));
  k.push_back(key_of("train.eval_batch_size", &C::train, &R::eval_batch_size)
                  .range(1, 65536)
                  .is(KeyClass::eval)
                  .doc("Sentences per evaluation batch."));
  k.push_back(key_of("train.eval_seed", &C::train, &R::eval_seed)
                  .range(0, double(kMaxInt))
                  .is(KeyClass::eval)
                  .doc("Seed of the evaluation sentences (the same every evaluation)."));
  k.push_back(key_of("train.log_every", &C::train, &R::log_every)
                  .range(1, 1e9)
                  .is(KeyClass::cadence)
                  .doc("Write a metrics row (and a log line) every this many steps."));
  k.push_back(key_of("train.checkpoint_every", &C::train, &R::checkpoint_every)
                  .range(0, 1e9)
                  .is(KeyClass::cadence)
                  .doc("Checkpoint every this many steps; 0: only at the end."));
  k.push_back(key_of("train.keep_checkpoints", &C::train, &R::keep_checkpoints)
                  .range(1, 1e6)
                  .is(KeyClass::cadence)
                  .doc("Newest checkpoints to keep."));
  k.push_back(key_of("train.timeline", &C::train, &R::timeline)
                  .is(KeyClass::cadence)
                  .doc("At every evaluation also measure each head's attention mass on each "
                       "relation and s_match, one row of timeline.jsonl (no ablations)."));
  k.push_back(key_of("train.timeline_batches", &C::train, &R::timeline_batches)
                  .range(0, 65536)
                  .is(KeyClass::cadence)
                  .doc("The timeline's masses come from the first this many evaluation batches "
                       "(0: all of them); accuracy and loss always from all."));
  k.push_back(
      key_of("train.pruning_importance", &C::train, &R::pruning_importance)
          .one_of({"gradient", "mean_ablation", "patching"})
          .is(KeyClass::cadence)
          .doc("What ranks the heads in the analysis' pruning curve: the gate gradient (Michel et "
               "al.), the loss rise under mean ablation, or the activation patching map "
               "(docs/analysis.md, \"Pruning\")."));
}

void runtime_keys(std::vector<Key>& k) {
  using U = RuntimeConfig;
  k.push_back(key_of("runtime.backend", &C::runtime, &U::backend)
                  .one_of({"auto", "reference", "blas", "onednn"})
                  .is(KeyClass::runtime)
                  .doc("Kernel backend."));
  // Declared result: bf16 products change what training computes, so a resume keeps it.
  k.push_back(key_of("runtime.precision", &C::runtime, &U::precision)
                  .one_of({"fp32", "bf16", "bf16_or_fp32"})
                  .is(KeyClass::result)
                  .doc("Matrix products in fp32, or in bf16 with fp32 accumulation on the CPU's "
                       "AVX512_BF16 instructions (backend onednn or auto; fp32 master weights, "
                       "optimizer state and reductions); bf16 is refused on a CPU without them, "
                       "bf16_or_fp32 runs fp32 there (docs/performance.md, \"bf16\")."));
  k.push_back(
      key_of("runtime.threads", &C::runtime, &U::threads)
          .range(0, 1024)
          .is(KeyClass::runtime)
          .doc("Threads for oneDNN and OpenBLAS; 0: all cores (small models run fastest on 1)."));
  k.push_back(key_of("runtime.max_memory_gb", &C::runtime, &U::max_memory_gb)
                  .range(0, 1e6, true)
                  .is(KeyClass::runtime)
                  .doc("Refuse configs whose estimated training memory exceeds this many GiB; "
                       "before building a model, train, eval, analyze and bench also check their "
                       "own estimate against the least of this, the machine's memory and "
                       "ulimit -v."));
  k.push_back(key_of("runtime.dist_timeout", &C::runtime, &U::dist_timeout)
                  .range(1, 1e6)
                  .is(KeyClass::runtime)
                  .doc("Under mpirun: seconds a rank waits for another before it ends the job "
                       "(docs/distributed.md)."));
  // Sharding changes where the state lives, not one bit of what is computed, and checkpoints
  // are the same file either way: a resume may turn it on or off.
  k.push_back(key_of("runtime.shard_optimizer", &C::runtime, &U::shard_optimizer)
                  .is(KeyClass::runtime)
                  .doc("Under mpirun: each rank updates and keeps the optimizer state of about "
                       "1/N of the parameters and broadcasts their new values (ZeRO-1; the same "
                       "bits and checkpoints as unsharded; summary.json's optimizer_state says "
                       "the bytes per rank); refused for an optimizer without a per-parameter "
                       "update (docs/distributed.md)."));
  // A plugin's identity is its content: run.json records each one's SHA-256 and a resume or an
  // eval refuses a changed one, so the paths themselves may change (a moved build directory).
  k.push_back(key_of("runtime.plugins", &C::runtime, &U::plugins)
                  .length(0, 64)
                  .is(KeyClass::runtime)
                  .doc("Plugins (shared libraries) to load before the model and task are "
                       "built, relative to the config file's folder; see docs/extending.md."));
}

std::vector<KeySpec> build_keys() {
  std::vector<Key> k;
  for (auto section : {model_keys, task_keys, optim_keys, schedule_keys, train_keys, runtime_keys})
    section(k);
  std::vector<KeySpec> out;
  for (auto& key : k) out.push_back(std::move(key.s));
  return out;
}

}  // namespace

const std::vector<KeySpec>& config_keys() {
  static const std::vector<KeySpec> keys = build_keys();
  return keys;
}

}  // namespace headlab
