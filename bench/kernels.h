#pragma once
// The kernel benchmark of `headlab bench --kernels`: GFLOP/s of matmul at the encoder's shapes
// per backend and thread count, beside the machine's FMA peak measured here (bench/fma_peak.h),
// then the time per call of the other kernels (softmax, LayerNorm, GELU). Each entry is the
// median of `reps` repetitions, each long enough (min_rep_seconds) to swamp the clock.

#include <nlohmann/json.hpp>

namespace headlab::bench {

struct KernelBenchOptions {
  int threads = 0;  // 0: every count from 1 to the hardware threads
  int reps = 5;     // timed repetitions; the median is reported
  double min_rep_seconds = 0.02;
};

// {"mode": "kernels", "reps", "peak": [{threads, isa, gflops}], "bf16_peak": [the same, for the
// bf16 dot product; empty without AVX512_BF16], "matmul": [{shape, m, n, k, batch, backend,
// threads, us_per_call, gflops, and "precision": "bf16" on the bf16 products' rows}], "kernels": [{kernel, backend, threads,
// us_per_call}]}. Leaves the thread count at the last one measured.
nlohmann::json run_kernels_bench(const KernelBenchOptions& options);

}  // namespace headlab::bench
