#pragma once
// The training-step benchmark of `headlab bench --preset S|M|L`: times the training step of exactly
// the encoder that bench/torch_reference.py (the PyTorch reference) builds, so the two can be
// compared:
//
//   token embedding (vocab 32, N(0, 1)) + learned positions (N(0, 0.02)) -> layers x post-norm
//   EncoderLayer [MHA, residual, LayerNorm, FFN 4x ReLU, residual, LayerNorm] (no dropout)
//   -> per-token Linear classifier -> cross-entropy against next-token targets (the input
//   rolled by one along T) -> Adam (lr 1e-3, PyTorch's defaults otherwise).
//
//   preset   seq  d_model  heads  batch  layers
//   S         16       64      4     64       2
//   M         32      128      8     64       2
//   L         64      256      8     32       4
//
// A step is zero_grad + forward + loss + backward + Adam step. After warm-up it reports the
// median, p10 and p90 ms per step, the inference forward (eval, NoGradGuard), the achieved
// GFLOP/s (the reference's analytic FLOP count) beside one core's FMA peak measured on the
// thread's CPU clock, the GEMM-only time of one step (every GEMM the step ran, including the
// products inside the fused attention kernel, replayed through the active backend, the median of
// each summed), peak RSS, and heap allocations per step (operator new calls plus new pooled
// buffers). Steps during which other
// processes used the CPU are flagged as in the reference, and the medians of the clean steps
// are reported beside.
//
// Under `mpirun -np N` (a Comm of N ranks) the step is data-parallel over the same global batch:
// rank r takes rows [r B/N, (r + 1) B/N) of the preset's batch, and the gradients are reduced as
// training reduces them (train/dist/reduce.h) before Adam; the report adds ranks,
// batch_per_rank and allreduce_ms_median (the reduction's time per step, waiting included).

#include <string>

#include <nlohmann/json.hpp>

namespace headlab {
class Comm;
}

namespace headlab::bench {

struct StepBenchOptions {
  std::string preset;  // "S", "M" or "L"; empty when the mode is not selected
  int steps = 0;       // timed steps; 0: the preset's default
  int warmup = 0;      // 0: the preset's default
  std::string backend = "auto";
  int seed = 0;
};

// Runs the benchmark on `threads` threads (0: 1), over the ranks of `comm` (null: alone).
// Throws headlab::Error for an unknown preset or backend, or a batch the ranks do not divide.
// The report is flat JSON (keys as in torch_reference.py where they mean the same).
nlohmann::json run_step_bench(const StepBenchOptions& options, int threads, Comm* comm = nullptr);

}  // namespace headlab::bench
