#include "bench/fma_peak.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <ctime>
#include <thread>

namespace headlab::bench {
namespace {

// Accumulators per kernel: AVX-512 has 32 zmm registers, AVX2 only 16 ymm (12 chains + the two
// constants leave room; 16 would spill). Either hides a 4-cycle FMA latency on two pipes.
constexpr int kChains512 = 16, kChains256 = 12;

__attribute__((target("avx512f"))) double fma_flops_avx512(int64_t iters) {
  __m512 acc[kChains512];
  for (int j = 0; j < kChains512; ++j) acc[j] = _mm512_set1_ps(static_cast<float>(j));
  const __m512 m = _mm512_set1_ps(0.9999999f), a = _mm512_set1_ps(1e-7f);
  for (int64_t i = 0; i < iters; ++i)
#pragma GCC unroll 16
    for (int j = 0; j < kChains512; ++j) acc[j] = _mm512_fmadd_ps(acc[j], m, a);
  __m512 sum = acc[0];
  for (int j = 1; j < kChains512; ++j) sum = _mm512_add_ps(sum, acc[j]);
  volatile float sink = _mm512_cvtss_f32(sum);
  (void)sink;
  return 2.0 * 16 * kChains512 * static_cast<double>(iters);  // 2 flops per lane per FMA
}

__attribute__((target("avx2,fma"))) double fma_flops_avx2(int64_t iters) {
  __m256 acc[kChains256];
  for (int j = 0; j < kChains256; ++j) acc[j] = _mm256_set1_ps(static_cast<float>(j));
  const __m256 m = _mm256_set1_ps(0.9999999f), a = _mm256_set1_ps(1e-7f);
  for (int64_t i = 0; i < iters; ++i)
#pragma GCC unroll 12
    for (int j = 0; j < kChains256; ++j) acc[j] = _mm256_fmadd_ps(acc[j], m, a);
  __m256 sum = acc[0];
  for (int j = 1; j < kChains256; ++j) sum = _mm256_add_ps(sum, acc[j]);
  volatile float sink = _mm256_cvtss_f32(sum);
  (void)sink;
  return 2.0 * 8 * kChains256 * static_cast<double>(iters);
}

// Only this function is built for AVX512_BF16 (called where the CPU has it): the rest of the
// binary runs on any x86-64. Inputs near 1 keep the accumulators finite.
__attribute__((target("avx512f,avx512bf16"))) double dot_flops_bf16(int64_t iters) {
  __m512 acc[kChains512];
  for (int j = 0; j < kChains512; ++j) acc[j] = _mm512_set1_ps(static_cast<float>(j));
  const __m512bh x = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-7f), _mm512_set1_ps(-1e-7f));
  const __m512bh y = _mm512_cvtne2ps_pbh(_mm512_set1_ps(0.5f), _mm512_set1_ps(0.25f));
  for (int64_t i = 0; i < iters; ++i)
#pragma GCC unroll 16
    for (int j = 0; j < kChains512; ++j) acc[j] = _mm512_dpbf16_ps(acc[j], x, y);
  __m512 sum = acc[0];
  for (int j = 1; j < kChains512; ++j) sum = _mm512_add_ps(sum, acc[j]);
  volatile float sink = _mm512_cvtss_f32(sum);
  (void)sink;
  return 2.0 * 32 * kChains512 * static_cast<double>(iters);  // 32 products per instruction
}

using FmaKernel = double (*)(int64_t);

bool has_avx512() {
  return __builtin_cpu_supports("avx512f");
}
bool has_bf16() {
  return has_avx512() && __builtin_cpu_supports("avx512bf16");
}
bool has_avx2() {
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// GFLOP/s of `threads` threads running `kernel` at once, each rate on the thread's own clock.
double fma_gflops(FmaKernel kernel, int threads, int runs, int64_t iters) {
  double best = 0.0;
  for (int run = 0; run < runs; ++run) {
    std::vector<double> rate(static_cast<size_t>(threads));
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&rate, kernel, iters, t] {
        const double t0 = thread_cpu_seconds();
        const double flops = kernel(iters);
        rate[static_cast<size_t>(t)] = flops / (thread_cpu_seconds() - t0);
      });
    for (auto& th : pool) th.join();
    double total = 0.0;
    for (double r : rate) total += r;
    best = std::max(best, total * 1e-9);
  }
  return best;
}

}  // namespace

std::vector<FmaPeak> fma_peaks(const std::vector<int>& threads) {
  std::vector<FmaPeak> peaks;
  for (int t : threads) {
    if (has_avx512())
      peaks.push_back({"avx512f", t, fma_gflops(fma_flops_avx512, t, 3, 10'000'000)});
    if (has_avx2()) peaks.push_back({"avx2+fma", t, fma_gflops(fma_flops_avx2, t, 3, 10'000'000)});
  }
  return peaks;
}

std::vector<FmaPeak> bf16_peaks(const std::vector<int>& threads) {
  std::vector<FmaPeak> peaks;
  if (!has_bf16()) return peaks;
  for (int t : threads)
    peaks.push_back({"avx512bf16", t, fma_gflops(dot_flops_bf16, t, 3, 10'000'000)});
  return peaks;
}

double bf16_peak_gflops_per_core() {
  return has_bf16() ? fma_gflops(dot_flops_bf16, 1, 5, 2'000'000) : 0.0;
}

double fma_peak_gflops_per_core() {
  if (has_avx512()) return fma_gflops(fma_flops_avx512, 1, 5, 2'000'000);
  if (has_avx2()) return fma_gflops(fma_flops_avx2, 1, 5, 2'000'000);
  return 0.0;
}

}  // namespace headlab::bench
