#pragma once
// The measuring half of `headlab bench --preset` and `--config`: given a training step and an
// inference forward of some model, times them as bench/torch_reference.py times PyTorch's, so the
// figures compare.
//
//   StepSubject s{.train_step = [&] { ...; return loss; }, .forward = [&] { ... },
//                 .forward_flops = F};
//   json r = measure_steps(s, {.warmup = 10, .steps = 100, .threads = 1});
//
// After `warmup` untimed steps it times `steps` training steps (median, mean, p10, p90, min; the
// steps during which other processes used the CPU are counted and the median of the clean ones
// given beside), the same number of inference forwards (in eval mode, under NoGradGuard), the
// GEMM-only time of one more step (every GEMM the step ran, the products inside the fused attention
// kernel included, each distinct one timed alone through the active backend, count x median
// summed), peak RSS, heap allocations per step (operator new calls plus new pooled buffers), and
// the achieved GFLOP/s of train_flops = 3 x forward_flops beside one core's FMA peak measured here.

#include <functional>

#include <nlohmann/json.hpp>

namespace headlab::bench {

struct StepSubject {
  std::function<float()> train_step;  // zero_grad, forward, loss, backward, update; the loss
  std::function<void()> forward;      // the inference forward (timed under NoGradGuard)
  std::function<void(bool training)> set_training;  // train or eval mode of the model
  double forward_flops = 0;  // matmul FLOPs of one forward (a multiply-add is 2)
  // Optional (data-parallel steps): seconds the last train_step spent reducing gradients over
  // its ranks; reported as allreduce_ms_median.
  std::function<double()> reduce_seconds;
  // Optional: when the last train_step began reducing, on this rank (steady clock, seconds). The
  // ranks of one host share that clock, so `bench --reduce` tells the time its rank 0 waited
  // for the last rank to arrive from the transfer itself (bench/reduce.h).
  std::function<double()> reduce_began;
};

struct MeasureOptions {
  int warmup = 1;
  int steps = 2;  // at least 2 (deciles)
  int threads = 1;
};

// The timing fields of the report (keys as in torch_reference.py where they mean the same):
// train_step_ms_{median,mean,p10,p90,min}, steps_clean, train_step_ms_median_clean,
// train_step_cpu_ms_median and infer_fwd_cpu_ms_median (the calling thread's CPU time: with one
// thread, the figure of a machine that other processes share),
// foreign_cpu_s_during_train, infer_fwd_ms_median(_clean), infer_steps_clean, train_flops_approx,
// achieved_gflops, fma_peak_gflops_per_core, fraction_of_fma_peak, infer_gflops_per_s,
// gemm_only_ms, gemm_calls_per_step, step_over_gemm_only, gemm_shapes, peak_rss_mb,
// allocations_per_step, operator_new_per_step, pool_heap_allocations_per_step,
// contention_monitor, loss_first, loss_last, steps, warmup, threads; with reduce_seconds also
// allreduce_ms_median (over the timed steps).
nlohmann::json measure_steps(const StepSubject& subject, const MeasureOptions& options);

}  // namespace headlab::bench
