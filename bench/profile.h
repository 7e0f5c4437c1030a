#pragma once
// `headlab bench --profile`: where the time of a training step goes, op by op. With the
// autograd profiling hook (autograd/profile.h) installed it runs `steps` steps after `warmup`
// untimed ones, and charges the time between consecutive events to rows:
//
//   forward  <op>      an op's forward: from the previous event to the op's end (the layer code
//                      between two ops goes to the op after it)
//   backward <op>      a tape entry's backward closure
//   region   <name>    optimizer.step, optimizer.zero_grad, clip_grad_norm
//   other    (outside ops)  everything else in the step: the batch, the loss's readout and
//                      metrics, the tape's bookkeeping before backward
//
// Each row gives its calls per step, its median ms per step over the steps and its share of
// the sum of the rows, and the GEMM-only time of the products it ran (each timed alone, as
// bench/gemm_only.h; recorded in one more step), so `ms / GEMM-only` shows where a step's time
// exceeds its GEMM floor.

#include <nlohmann/json.hpp>

#include "bench/measure.h"

namespace headlab::bench {

struct ProfileOptions {
  int warmup = 1;
  int steps = 2;
  // Time on this thread's CPU clock instead of the wall clock (the rows and their GEMM-only
  // time): with one thread, the figures of a machine other processes share (the clock stops
  // while they have the core; each reading is a system call of about a microsecond, charged to
  // no row).
  bool cpu_clock = false;
};

// {"clock", "profile_steps", "step_ms_median" (with the hook installed), "rows_ms_total", "gemm_only_ms",
//  "rows": [{"kind", "op", "calls", "ms", "share", "gemm_only_ms", "gemm_calls"}] sorted by ms}.
nlohmann::json profile_steps(const StepSubject& subject, const ProfileOptions& options);

}  // namespace headlab::bench
