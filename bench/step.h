#pragma once
// The training-step benchmarks of `headlab bench`: the workload (what is stepped) and the two
// ways of looking at it.
//
//   --preset S|M|L   exactly the encoder that bench/torch_reference.py (the PyTorch reference)
//                    builds, so the two compare (bench/preset.cpp):
//       token embedding (vocab 32, N(0, 1)) + learned positions (N(0, 0.02)) -> layers x
//       post-norm EncoderLayer [MHA, residual, LayerNorm, FFN 4x ReLU, residual, LayerNorm] (no
//       dropout) -> per-token Linear classifier -> cross-entropy against next-token targets (the
//       input rolled by one along T) -> Adam (lr 1e-3, PyTorch's defaults otherwise).
//           preset   seq  d_model  heads  batch  layers
//           S         16       64      4     64       2
//           M         32      128      8     64       2
//           L         64      256      8     32       4
//   --config FILE    the training step of any config (bench/config_step.cpp): its task, batch,
//                    model, optimizer and schedule, built and stepped by the training's own
//                    code (RunModel, TrainStep: train/run/step.h), with no run directory.
//
// run_step_bench measures the step (bench/measure.h: median/p10/p90 ms, inference forward,
// GFLOP/s beside the FMA peak, GEMM-only time, peak RSS, allocations per step);
// run_step_profile splits one step by op (bench/profile.h).
//
// Under `mpirun -np N` (options.comm of N ranks) the preset's step is data-parallel over the same
// global batch: rank r takes rows [r B/N, (r + 1) B/N) of the preset's batch, and the gradients
// are reduced as training reduces them (train/distributed/reduce.h) before Adam (where N does not
// divide B, some ranks take a row more); the report adds ranks, batch_per_rank (rank 0's),
// overlap and allreduce_ms_median (the reduction's time per step, waiting included; with the
// overlap, only the part after the backward: what the step waits for).

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/measure.h"

namespace headlab {
class Comm;
}

namespace headlab::bench {

struct StepBenchOptions {
  std::string preset;             // "S", "M" or "L"; or
  std::string config;             // a config file (with `sets` applied)
  std::vector<std::string> sets;  // --set KEY=VALUE overrides of the config
  int steps = 0;                  // timed steps; 0: the workload's default
  int warmup = 0;                 // 0: the workload's default
  std::string backend;            // empty: the config's runtime.backend (presets: auto)
  std::string precision;          // empty: the config's runtime.precision (presets: fp32)
  int seed = 0;                   // presets: parameters and batch
  bool cpu_clock = false;         // --profile on the thread's CPU clock
  Comm* comm = nullptr;           // the ranks of a data-parallel preset step (null: alone)
  // Presets over ranks: the reduction overlaps the backward, as training's does (false: it
  // starts after the backward, as before the overlap; for comparing the two).
  bool overlap = true;
  // Presets over ranks: ZeRO-1, each rank updates and keeps the Adam state of its own parameters
  // and broadcasts their new values (runtime.shard_optimizer; for comparing with unsharded).
  bool shard_optimizer = false;
};

// What measure_steps and profile_steps run, what it is (merged into their reports), its default
// step counts, and the objects the subject's closures use.
struct Workload {
  StepSubject subject;
  nlohmann::json description;
  int warmup = 1, steps = 2;
  std::shared_ptr<void> state;
};

// Throw headlab::Error for an unknown preset or backend, or a config that does not load.
// `threads` 0 keeps the config's runtime.threads (presets: 1).
Workload preset_workload(const StepBenchOptions& options, int threads);
Workload config_workload(const StepBenchOptions& options, int threads);
// The length of each gradient buffer of a preset's model, in the order its step reduces them.
std::vector<int64_t> preset_gradient_sizes(const std::string& preset);

// The flat report of measure_steps plus the description (keys as in torch_reference.py where
// they mean the same).
nlohmann::json run_step_bench(const StepBenchOptions& options, int threads);
// The per-op table of profile_steps plus the description.
nlohmann::json run_step_profile(const StepBenchOptions& options, int threads);

}  // namespace headlab::bench
