#pragma once
// RunModel: a run's model, as `headlab eval`, `analyze` and `bench` need it and as the training
// step (step.h) and the run (trainer.h) build on: the validated Config it was built from, its
// task and its encoder.
//
// Building one sets the process's thread count, kernel backend and precision (runtime.threads,
// runtime.backend, runtime.precision: resolve_precision), makes the task (train/tasks/registry.h) and the encoder from the config's
// options (encoder_options, train/config/model.h), initialised from train.seed, so that every
// rank and every process builds the same weights; its dropout masks are keyed by train.seed too
// (core/sample_rng.h). It writes nothing. restore() loads a checkpoint's weights once it has
// checked that the checkpoint is this run's.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "train/config/config.h"

namespace headlab {

class Encoder;
class Task;
struct CheckpointData;
enum class Precision;

// runtime.precision resolved on this machine: "fp32"; "bf16", refused (headlab::Error, one line
// naming runtime.precision and its position) on a CPU without AVX512_BF16 or with a backend
// other than onednn (auto); "bf16_or_fp32": bf16 where that holds, else fp32.
Precision resolve_precision(const Config& config);

class RunModel {
 public:
  // Throws headlab::Error for what only the layers can check (a layer option table's unknown
  // key, ...), prefixed with the position in the config it came from.
  explicit RunModel(Config config);
  ~RunModel();
  RunModel(const RunModel&) = delete;
  RunModel& operator=(const RunModel&) = delete;

  // Loads the weights of checkpoint `c` (load_checkpoint, train/run/checkpoint.h) after checking,
  // each a headlab::Error naming the checkpoint: that it was written by the run in `run_dir`
  // (when both carry a run id; a checkpoint copied in from another run directory), that this config computes the
  // same run (identity_differences for `use`, listing every key with both values; resume counts
  // the checkpoint's ranks), that a resumed run is not past train.steps, that its data cursor is
  // its step, that the task's vocabularies are the run's (vocab.json, train/run/vocab_file.h)
  // and that its tensors fit. The optimizer's state is the training step's to load.
  void restore(const CheckpointData& c, ConfigUse use, const std::filesystem::path& run_dir,
               int64_t ranks = 1);

  const Config& config() const { return config_; }
  const Task& task() const { return *task_; }
  Encoder& encoder() { return *encoder_; }
  int64_t parameter_count() const;

 private:
  Config config_;
  std::unique_ptr<Task> task_;
  std::unique_ptr<Encoder> encoder_;
};

}  // namespace headlab
