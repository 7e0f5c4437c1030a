#pragma once
// The GEMM floor of a step: the products a step ran (every gemm and gemm_bias_act call, and the
// products the fused attention stands for, seen through the GEMM observer), each distinct
// descriptor timed alone on the active backend. `headlab bench` divides the step by this
// (step / GEMM-only) and `--profile` charges it to the op that ran each product.

#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/kernels/kernels.h"
#include "core/tensor.h"

namespace headlab::bench {

// Collects the descriptors of the products the kernels run while installed.
struct GemmRecorder final : GemmObserver {
  std::vector<GemmDesc> descs;
  void on_gemm(const GemmDesc& d) override { descs.push_back(d); }
};

// 2 m n k per batch item (a multiply-add is 2 FLOPs).
double gemm_flops(const GemmDesc& d);

// Every field of the resolved descriptor: equal keys are the same product.
using GemmKey = std::tuple<bool, bool, int64_t, int64_t, int64_t, float, float, int64_t, int64_t,
                           int64_t, int64_t, int64_t, int64_t, int64_t>;
GemmKey gemm_key(const GemmDesc& d);

// Times descriptors alone: the median of `reps` timed batches (each ~2 ms) after a warm-up call
// that creates any cached primitive, remembered per distinct descriptor. Operands are shared
// buffers of small values (beta = 1 accumulation stays finite), grown as needed.
class GemmTimer {
 public:
  // cpu_clock: on this thread's CPU clock (one thread on a shared machine), else the wall clock.
  explicit GemmTimer(int reps = 5, bool cpu_clock = false) : reps_(reps), cpu_(cpu_clock) {}
  // Seconds per call of d on the active backend.
  double seconds(const GemmDesc& d);

 private:
  void reserve(const GemmDesc& d);

  double now() const;

  int reps_;
  bool cpu_;
  std::map<GemmKey, double> seconds_;
  Tensor a_, b_, c_;
};

struct GemmOnly {
  double ms = 0.0;     // sum over descs of the time of each alone
  double flops = 0.0;  // sum of gemm_flops
  int64_t calls = 0;
  nlohmann::json shapes = nlohmann::json::array();  // per distinct descriptor: count, us, GFLOP/s
};

GemmOnly time_gemms(const std::vector<GemmDesc>& descs, GemmTimer& timer);

}  // namespace headlab::bench
