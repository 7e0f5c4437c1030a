// The GEMM floor of a step (see bench/gemm_only.h).

#include "bench/gemm_only.h"

#include <algorithm>
#include <chrono>
#include <ctime>

namespace headlab::bench {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : 0.5 * (v[h - 1] + v[h]);
}

// Floats an operand spans: `batch` items `stride` apart, each `rows` rows `ld` apart of `cols`.
int64_t operand_extent(int64_t batch, int64_t stride, int64_t rows, int64_t cols, int64_t ld) {
  if (batch == 0 || rows == 0 || cols == 0) return 0;
  return (batch - 1) * stride + (rows - 1) * ld + cols;
}

Tensor filled(int64_t n) {
  Tensor t = Tensor::empty({std::max<int64_t>(n, 1)});
  for (int64_t i = 0; i < t.numel(); ++i)
    t[i] = static_cast<float>((i * 7919) % 97) * 1e-4f - 0.005f;
  return t;
}

}  // namespace

double gemm_flops(const GemmDesc& d) {
  return 2.0 * static_cast<double>(d.m) * static_cast<double>(d.n) * static_cast<double>(d.k) *
         static_cast<double>(d.batch);
}

GemmKey gemm_key(const GemmDesc& g) {
  const GemmDesc d = g.resolved();
  return {d.trans_a, d.trans_b, d.m,   d.n,     d.k,        d.alpha,    d.beta,
          d.lda,     d.ldb,     d.ldc, d.batch, d.stride_a, d.stride_b, d.stride_c};
}

void GemmTimer::reserve(const GemmDesc& g) {
  const GemmDesc d = g.resolved();
  const int64_t na =
      operand_extent(d.batch, d.stride_a, d.trans_a ? d.k : d.m, d.trans_a ? d.m : d.k, d.lda);
  const int64_t nb =
      operand_extent(d.batch, d.stride_b, d.trans_b ? d.n : d.k, d.trans_b ? d.k : d.n, d.ldb);
  const int64_t nc = operand_extent(d.batch, d.stride_c, d.m, d.n, d.ldc);
  if (!a_.defined() || a_.numel() < na) a_ = filled(na);
  if (!b_.defined() || b_.numel() < nb) b_ = filled(nb);
  if (!c_.defined() || c_.numel() < nc) c_ = filled(nc);
}

double GemmTimer::now() const {
  if (!cpu_) return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double GemmTimer::seconds(const GemmDesc& d) {
  const GemmKey key = gemm_key(d);
  if (auto it = seconds_.find(key); it != seconds_.end()) return it->second;
  reserve(d);
  const Kernels& k = kernels();
  auto call = [&] { k.gemm(d, a_.data(), b_.data(), c_.data()); };
  call();  // creates a cached primitive
  // Enough calls per timed batch to last ~2 ms, so the clock's resolution does not matter.
  const double t0 = now();
  call();
  const double once = now() - t0;
  const int64_t iters = std::clamp<int64_t>(static_cast<int64_t>(2e-3 / (once + 1e-9)), 1, 1000);
  std::vector<double> per_call;
  for (int r = 0; r < reps_; ++r) {
    const double s0 = now();
    for (int64_t i = 0; i < iters; ++i) call();
    per_call.push_back((now() - s0) / static_cast<double>(iters));
  }
  return seconds_[key] = median(per_call);
}

GemmOnly time_gemms(const std::vector<GemmDesc>& descs, GemmTimer& timer) {
  std::map<GemmKey, std::pair<GemmDesc, int64_t>> distinct;  // with their counts
  for (const GemmDesc& g : descs)
    ++distinct.try_emplace(gemm_key(g), g.resolved(), 0).first->second.second;
  GemmOnly out;
  for (const auto& [key, entry] : distinct) {
    const auto& [d, count] = entry;
    const double s = timer.seconds(d);
    out.ms += 1e3 * s * static_cast<double>(count);
    out.flops += gemm_flops(d) * static_cast<double>(count);
    out.calls += count;
    out.shapes.push_back({{"m", d.m},
                          {"n", d.n},
                          {"k", d.k},
                          {"batch", d.batch},
                          {"trans_a", d.trans_a},
                          {"trans_b", d.trans_b},
                          {"beta", d.beta},
                          {"lda", d.lda},
                          {"ldb", d.ldb},
                          {"ldc", d.ldc},
                          {"count", count},
                          {"us_per_call", 1e6 * s},
                          {"gflops", gemm_flops(d) / s * 1e-9}});
  }
  return out;
}

}  // namespace headlab::bench
