#include "train/run/model.h"

#include "core/kernels/kernels.h"
#include "core/rng.h"
#include "core/threads.h"
#include "layers/encoder.h"
#include "train/config/model.h"
#include "train/run/checkpoint.h"
#include "train/run/run_dir.h"
#include "train/run/vocab_file.h"
#include "train/tasks/registry.h"

namespace headlab {
namespace {

// Streams of train.seed other than the data stream (which uses indices 0, 1, 2, ... = steps):
// far-away stream numbers keep initialisation and dropout independent of every batch.
constexpr uint64_t kInitStream = 0x494e4954ull << 32;     // "INIT"
constexpr uint64_t kDropoutStream = 0x44524f50ull << 32;  // "DROP"

}  // namespace

Precision resolve_precision(const Config& config) {
  const std::string& p = config.runtime.precision;
  if (p == "fp32") return Precision::fp32;
  const bool onednn = parse_backend(config.runtime.backend) == Backend::onednn;
  if (p == "bf16_or_fp32") return onednn && bf16_supported() ? Precision::bf16 : Precision::fp32;
  if (!onednn)
    fail(
        "{}: runtime.precision = \"bf16\" needs runtime.backend \"onednn\" or \"auto\", not \"{}\"",
        config.where("runtime.precision"), config.runtime.backend);
  if (!bf16_supported())
    fail(
        "{}: runtime.precision = \"bf16\" needs a CPU with AVX512_BF16 instructions, which this "
        "one lacks (\"bf16_or_fp32\" runs fp32 here)",
        config.where("runtime.precision"));
  return Precision::bf16;
}

RunModel::RunModel(Config config) : config_(std::move(config)) {
  set_num_threads(static_cast<int>(config_.runtime.threads));
  set_backend(parse_backend(config_.runtime.backend));
  set_precision(resolve_precision(config_));
  task_ = make_task(config_.task);
  const auto seed = static_cast<uint64_t>(config_.train.seed);
  Rng init_rng = Rng::derive(seed, kInitStream);
  EncoderOptions options = encoder_options(config_, *task_);
  options.dropout_seed = Rng::derive(seed, kDropoutStream).next_u64();
  try {
    encoder_ = std::make_unique<Encoder>(options, init_rng);
  } catch (const Error& e) {
    rethrow_with_position(e, config_);
  }
  encoder_->train();
}

RunModel::~RunModel() = default;

int64_t RunModel::parameter_count() const {
  int64_t n = 0;
  for (const auto& p : encoder_->named_parameters()) n += p.var.numel();
  return n;
}

void RunModel::restore(const CheckpointData& c, ConfigUse use, const std::filesystem::path& run_dir,
                       int64_t ranks) {
  const std::string where = c.dir.string();
  const char* verb = use == ConfigUse::resume ? "resume from" : "evaluate";
  const std::string run_id = has_run_marker(run_dir) ? read_run_marker(run_dir) : std::string();
  if (!c.run_id.empty() && !run_id.empty() && c.run_id != run_id)
    fail(
        "cannot {} '{}': it was written by run {}, but '{}' is run {} (a checkpoint copied in "
        "from another run directory?)",
        verb, where, c.run_id, run_dir.string(), run_id);
  const Config saved = parse_config(c.resolved_config, (c.dir / "config.resolved.toml").string());
  // A run is defined by its global batch, not by how it is split (docs/distributed.md); an
  // evaluation runs on one process whatever the run's ranks were.
  const int64_t saved_ranks =
      use == ConfigUse::resume ? c.extra.value("world_size", int64_t{1}) : 1;
  const std::vector<std::string> diffs =
      identity_differences(saved, config_, use, saved_ranks, use == ConfigUse::resume ? ranks : 1);
  if (!diffs.empty()) {
    std::string list;
    for (const auto& d : diffs) list += (list.empty() ? "" : "; ") + d;
    if (use == ConfigUse::resume)
      fail(
          "cannot resume from '{}': the config changes what the run computes ({}); restore "
          "those values, or start a new run (--overwrite, or another --out)",
          where, list);
    fail(
        "cannot evaluate '{}': the config changes what the run computes ({}); only train.eval_* "
        "and runtime.* may differ from the run's",
        where, list);
  }
  if (use == ConfigUse::resume && c.step > config_.train.steps)
    fail("cannot resume from '{}': it is at step {} but train.steps is {}", where, c.step,
         config_.train.steps);
  if (c.data_cursor != c.step)
    fail("cannot {} '{}': data cursor {} differs from step {}", verb, where, c.data_cursor, c.step);
  if (!run_id.empty()) check_run_vocabulary(run_dir, *task_);  // the ids the run trained with
  try {
    encoder_->load_state_dict(c.model);
  } catch (const Error& e) {
    fail("cannot {} '{}': {}", verb, where, e.what());
  }
}

}  // namespace headlab
