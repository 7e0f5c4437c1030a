#pragma once
// The CPU's fused multiply-add peak, the yardstick `headlab bench` divides achieved GFLOP/s by.
// Independent FMA chains per thread: enough to hide the FMA latency on two pipes, few enough to
// stay in registers. Each thread times itself on its own CPU clock, so other processes sharing
// the machine (or staggered thread starts) do not lower the figure.

#include <string>
#include <vector>

namespace headlab::bench {

struct FmaPeak {
  std::string isa;  // "avx512f" or "avx2+fma"; "avx512bf16": the bf16 dot-product peak
  int threads = 1;
  double gflops = 0.0;  // summed over the threads
};

// The peak of every vector ISA this CPU has, at each thread count: AVX-512 is what oneDNN's
// kernels use here, AVX2 what OpenBLAS's Haswell kernels use. Best of three runs of 20-50 ms.
std::vector<FmaPeak> fma_peaks(const std::vector<int>& threads);

// The bf16 dot-product peak (vdpbf16ps: 16 lanes of two bf16 products added to an fp32
// accumulator, 64 flops an instruction) at each thread count, where the CPU has AVX512_BF16
// (empty elsewhere); measured as fma_peaks. The yardstick of the bf16 products.
std::vector<FmaPeak> bf16_peaks(const std::vector<int>& threads);

// One core's peak with the widest ISA the CPU has (0 without AVX2+FMA). Best of five runs of
// about 5 ms.
double fma_peak_gflops_per_core();
// Likewise the bf16 dot-product peak (0 without AVX512_BF16).
double bf16_peak_gflops_per_core();

}  // namespace headlab::bench
