#pragma once
// The run configuration: what `headlab train` reads from a TOML file.
//
// The structs below, and the optimizer's and schedule's options they hold (optim/factory.h), are
// the ONE place where defaults live; configs/README.md's table is generated from them through
// the key schema (train/config/schema.h). `task.name` is the only
// required key. Loading is strict: an unknown key, a wrong type, a value out of range or an
// inconsistent combination throws headlab::Error whose message starts with the position of the
// offending key ("dependency.toml:3:9: ", or "--set model.heads=5: " for an override) and names
// the dotted key, the expected and the actual value. Cross-field checks (heads divides d_model,
// the memory estimate, ...) run before anything is allocated.

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "layers/options.h"
#include "optim/factory.h"
#include "train/distributed/comm.h"
#include "train/tasks/task.h"  // TaskConfig

namespace headlab {

struct ModelConfig {
  int64_t d_model = 64;
  int64_t heads = 4;
  int64_t head_dim = 0;  // 0: d_model / heads (then heads must divide d_model)
  int64_t layers = 1;
  int64_t d_ff = 128;   // 0: attention-only layers
  bool causal = false;  // causal self-attention
  std::string activation = "relu";
  std::string norm = "pre";
  std::string positions = "learned";
  double embed_init_std = 1.0;
  double pos_init_std = 1.0;
  double dropout = 0.0;
  double attn_dropout = 0.0;
  int64_t dropout_steps = 0;     // early dropout: dropout and attn_dropout only before this step
  std::string init = "default";  // Linear layers: "default" (PyTorch's) | "xavier_uniform"
  // Layer registry names of the three slots of every encoder layer (the norm slot also fills
  // the final norm) and of the positions slot, and each slot's own options ([model.norm_options]
  // eps = 1e-6, ...), by name, empty when absent. Their keys are checked by the layer's factory
  // when the model is built.
  std::string attention_layer = "multi_head_attention";
  std::string ffn_layer = "feed_forward";
  std::string norm_layer = "layer_norm";
  std::string positions_layer = "positional_encoding";
  OptionMap attention_options;
  OptionMap ffn_options;
  OptionMap norm_options;
  OptionMap positions_options;
};

struct TrainConfig {
  int64_t steps = 1000;
  int64_t batch_size = 32;  // sentences per micro-batch
  int64_t grad_accum = 1;   // micro-batches per step and rank (docs/distributed.md)
  int64_t seed = 1;
  int64_t eval_every = 50;  // 0: only at the end
  int64_t eval_batches = 8;
  int64_t eval_batch_size = 256;
  int64_t eval_seed = 20240607;
  int64_t log_every = 10;
  int64_t checkpoint_every = 250;  // 0: only at the end
  int64_t keep_checkpoints = 3;
  bool timeline = true;          // head masses at every evaluation, into timeline.jsonl
  int64_t timeline_batches = 2;  // of the evaluation batches, measured for the timeline; 0: all
  // What ranks heads for the analysis' pruning curve (train/analysis/pruning.h).
  std::string pruning_importance = "gradient";
};

struct RuntimeConfig {
  std::string backend = "auto";
  // Matrix products in "fp32", "bf16" (refused on a CPU without AVX512_BF16) or "bf16_or_fp32"
  // (bf16 where the CPU has it, else fp32); core/kernels/kernels.h, Precision.
  std::string precision = "fp32";
  int64_t threads = 1;  // 0: all cores
  double max_memory_gb = 8.0;
  double dist_timeout = kDefaultPeerTimeout;  // seconds a rank waits for another
  // Under mpirun: each rank keeps the optimizer state of ~1/N of the parameters (ZeRO-1,
  // train/run/optimizer_shard.h). Off by default: the gradient reduction still gives every rank
  // the whole gradient, so sharding saves memory but adds a broadcast of the parameters.
  bool shard_optimizer = false;
  // Plugins (train/plugins/plugin.h) loaded before the slots and the task are checked. Given
  // relative to the config file's folder (to the current directory in a --set); a loaded config
  // holds them absolute.
  std::vector<std::string> plugins;
};

struct Config {
  ModelConfig model;
  TaskConfig task;
  OptimizerOptions optim;    // [optim]: the optimizer's own options (optim/factory.h)
  ScheduleOptions schedule;  // [schedule], but total_steps: a run takes it from train.steps
  TrainConfig train;
  RuntimeConfig runtime;

  // Where each explicitly given key came from: dotted key -> "file:line:col" or
  // "--set key=value". Keys left at their default are absent.
  std::map<std::string, std::string> origins;
  std::string source;  // the file name (or "<string>") the config was read from
  // Every override applied, as its origin names it ("--set model.heads=8"), in order; to_toml
  // records them.
  std::vector<std::string> overrides;

  // The position prefix for messages about `key`: its origin, else the file name.
  std::string where(const std::string& key) const;
};

// Called with each runtime.plugins entry (absolute) while a config is read, before its layer
// slots and task are checked, so that the names a plugin registers may be used there. Reading a
// config loads nothing by itself: a program that runs plugins passes one (the CLI passes
// load_plugin, train/plugins/loader.h); without one, a plugin's layers and tasks must be
// registered already, else the config names them as unknown.
using PluginLoader = std::function<void(const std::filesystem::path& plugin)>;

// Reads `file` (a regular file, a pipe or a device, at most 16 MiB), applies each override
// ("a.b=value", later ones win), resolves runtime.plugins (absolute from the file's folder)
// and hands each to `load_plugin`, fills defaults and validates (see validate_config). A value is
// TOML, or as people type it: a bare string where the key is a string (model.norm=post) and
// a,b,c where it is an array (optim.betas=0.9,0.98). `override_origins[i]`, when given, names
// override i in messages instead of "--set <override>" (a sweep's "--over model.heads=4,5").
// Throws headlab::Error: unreadable file, TOML syntax error (with file:line:col), unknown key
// (with a did-you-mean), wrong type, value out of range, NaN/Inf, failed cross-field check.
Config load_config(const std::filesystem::path& file, std::span<const std::string> overrides = {},
                   std::span<const std::string> override_origins = {},
                   const PluginLoader& load_plugin = {});
// The same for a config headlab wrote into a run or checkpoint directory
// (config.resolved.toml): a regular file only, at most 16 MiB, opened without blocking, so a
// FIFO or a device planted there is refused rather than read.
Config load_run_config(const std::filesystem::path& file,
                       std::span<const std::string> overrides = {});
// The same for TOML text; `source_name` stands in for the file name in messages.
Config parse_config(std::string_view toml_text, std::string_view source_name,
                    std::span<const std::string> overrides = {},
                    std::span<const std::string> override_origins = {},
                    const PluginLoader& load_plugin = {});

// Cross-field checks: heads divides d_model (unless head_dim is given), betas, min_lr <= lr,
// relations, sizes within bounds and the memory estimate within runtime.max_memory_gb. Called
// by load_config/parse_config; throws headlab::Error naming the key(s) and position.
void validate_config(const Config& config);

// What the memory is estimated for. `train`: parameters, gradients, optimizer state, and the
// activations the tape keeps for one training batch and their gradients (or one evaluation
// batch, if larger). `evaluate` (eval): parameters and one evaluation batch's activations, no
// tape. `analyze` (the head analysis, also the one at the end of `headlab train`): parameters
// and their gradients, one evaluation batch's activations and their gradients (the gate
// gradients run backward over evaluation batches) and the attention maps kept for
// attention.npy.
enum class MemoryUse { train, evaluate, analyze };

// Approximate bytes `use` needs. `examples`: the sentences whose attention maps the analysis
// keeps (analyze only).
struct MemoryEstimate {
  int64_t parameters = 0;  // count
  double parameter_bytes = 0;
  double optimizer_bytes = 0;
  double activation_bytes = 0;
  double total_bytes() const { return parameter_bytes + optimizer_bytes + activation_bytes; }
};
MemoryEstimate estimate_memory(const Config& config, MemoryUse use = MemoryUse::train,
                               int64_t examples = 0);

// The memory an estimate must stay within: the smallest of runtime.max_memory_gb, this
// machine's physical memory (MemTotal, or the cgroup's memory.max where that is lower) and the
// address-space limit (ulimit -v). A config asking more than the machine has would only meet
// the OOM killer (exit 137, no message) or std::bad_alloc, so raising runtime.max_memory_gb
// never lifts the limit above what is there.
struct MemoryLimit {
  double bytes = 0;
  std::string what;  // "runtime.max_memory_gb = 8", "this machine's physical memory, 23.4 GiB
                     // (runtime.max_memory_gb = 1000 is higher)", ...
};
MemoryLimit memory_limit(const Config& config);

// Throws headlab::Error when estimate_memory(config, use, examples) exceeds memory_limit(config),
// naming the explicitly set size that drives it (else runtime.max_memory_gb), the estimate, its
// parts and the limit. validate_config checks the `train` estimate against runtime.max_memory_gb
// alone (a config is valid or not on every machine); a program calls this right before it
// allocates a model (the CLI: train and its --dry-run, eval, analyze, bench --config).
void check_memory(const Config& config, MemoryUse use = MemoryUse::train, int64_t examples = 0);

// The resolved config as TOML: every key, defaults filled, in schema order, after a comment
// listing the overrides (Config::overrides). Parsing it back gives an equal config.
std::string to_toml(const Config& config);
// FNV-1a 64 of the values of to_toml(config) (the override comments left out), as 16 hex
// digits: stable across runs and machines.
std::string config_hash(const Config& config);
// Keys whose values differ between two configs, restricted to keys that change parameter or
// optimizer-state shapes ("model.heads: 4 (checkpoint) vs 8 (config)" per entry). Empty when
// a checkpoint of `saved` can be loaded into a model built from `current`.
std::vector<std::string> shape_differences(const Config& saved, const Config& current);
// Every key (shape-relevant or not) that differs, same format.
std::vector<std::string> config_differences(const Config& saved, const Config& current);

// What a config loaded over a checkpoint is for.
enum class ConfigUse { resume, evaluate };
// The differences that make `current` another run than the checkpoint's `saved` config, by the
// keys' classes (KeyClass, train/config/schema.h), same format as above: every key that changes
// the result (model, task, optim, schedule, train.seed, the layers' options), the global batch,
// and for resume also train.eval_*. Steps, cadence and runtime keys may change. Values are
// compared resolved, so a value spelled out as its default is no change (layer options too).
// Empty when `current` continues or evaluates the same run.
// `saved_ranks` and `ranks`: the processes the checkpoint was written by and this run has.
std::vector<std::string> identity_differences(const Config& saved, const Config& current,
                                              ConfigUse use, int64_t saved_ranks = 1,
                                              int64_t ranks = 1);
// Sentences per optimizer update on `ranks` processes: train.batch_size x train.grad_accum x
// ranks. The global batch is what identifies a run, not how it is split; a key that splits it
// (gradient accumulation, ranks) is KeyClass::batch and multiplies in here.
int64_t global_batch(const Config& config, int64_t ranks = 1);

}  // namespace headlab
