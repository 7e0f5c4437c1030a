// The kernel benchmark behind `headlab bench --kernels` (see bench/kernels.h).

#include "bench/kernels.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <vector>

#include "bench/fma_peak.h"
#include "core/kernels/kernels.h"
#include "core/kernels/simd/gemm.h"
#include "core/tensor.h"
#include "core/threads.h"

namespace headlab::bench {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

std::vector<int> thread_counts(const KernelBenchOptions& o) {
  if (o.threads > 0) return {o.threads};
  std::vector<int> counts{1};
  if (hardware_threads() > 1) counts.push_back(hardware_threads());
  return counts;
}

// Median seconds per call of f: iterations per repetition grow until one repetition lasts
// min_rep_seconds, after a warm-up call (which creates cached primitives).
template <class F>
double seconds_per_call(F&& f, const KernelBenchOptions& o) {
  f();
  int64_t iters = 1;
  for (;;) {
    const auto t0 = Clock::now();
    for (int64_t i = 0; i < iters; ++i) f();
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (s >= o.min_rep_seconds || iters >= (int64_t{1} << 24)) break;
    iters =
        std::max<int64_t>(iters * 2, static_cast<int64_t>(iters * o.min_rep_seconds / (s + 1e-9)));
  }
  std::vector<double> per_call;
  for (int r = 0; r < o.reps; ++r) {
    const auto t0 = Clock::now();
    for (int64_t i = 0; i < iters; ++i) f();
    per_call.push_back(std::chrono::duration<double>(Clock::now() - t0).count() / iters);
  }
  std::nth_element(per_call.begin(), per_call.begin() + per_call.size() / 2, per_call.end());
  return per_call[per_call.size() / 2];
}

// ---- Matmul shapes of the encoder (B*T = 2048 tokens, d_model 64 or 256, FFN 4x, 16-token
// sequences with 256 (batch x head) items in attention), forward and the two backward products.
struct MatmulCase {
  std::string name;
  GemmDesc d;
};

std::vector<MatmulCase> encoder_matmuls() {
  auto mk = [](int64_t m, int64_t n, int64_t k, int64_t batch = 1, bool ta = false, bool tb = false,
               float alpha = 1.0f, float beta = 0.0f) {
    GemmDesc d;
    d.m = m, d.n = n, d.k = k, d.batch = batch, d.trans_a = ta, d.trans_b = tb;
    d.alpha = alpha, d.beta = beta;
    return d;
  };
  return {
      {"2048x64x64 (linear d64)", mk(2048, 64, 64)},
      {"2048x256x64 (ffn up d64)", mk(2048, 256, 64)},
      {"2048x64x256 (ffn down d64)", mk(2048, 64, 256)},
      {"1024x256x256 (linear d256)", mk(1024, 256, 256)},
      {"2048x64x64 B^T (dX)", mk(2048, 64, 64, 1, false, true)},
      {"64x64x2048 A^T +C (dW)", mk(64, 64, 2048, 1, true, false, 1.0f, 1.0f)},
      {"256 x 16x16x16 B^T (scores)", mk(16, 16, 16, 256, false, true, 0.25f)},
      {"256 x 16x16x64 B^T (scores d64)", mk(16, 16, 64, 256, false, true, 0.125f)},
      {"256 x 16x64x16 (probs V)", mk(16, 64, 16, 256)},
  };
}

Tensor filled(int64_t n) {
  Tensor t = Tensor::empty({std::max<int64_t>(n, 1)});
  float* p = t.data();
  for (int64_t i = 0; i < t.numel(); ++i)
    p[i] = static_cast<float>((i * 7919) % 1000) * 1e-3f - 0.5f;
  return t;
}

json bench_matmuls(const KernelBenchOptions& o, const std::vector<int>& threads) {
  constexpr double kReferenceMaxFlops = 1e7;  // the plain loops run ~1 GFLOP/s: small sizes only
  json rows = json::array();
  for (const MatmulCase& c : encoder_matmuls()) {
    const GemmDesc d = c.d.resolved();
    const double flops = 2.0 * d.m * d.n * d.k * d.batch;
    Tensor a = filled(d.batch * d.m * d.k), b = filled(d.batch * d.k * d.n),
           out = filled(d.batch * d.m * d.n);
    // One row per timed call: the fp32 rows carry no precision (as before bf16 existed).
    const auto time = [&](Backend backend, int t, const char* precision) {
      set_num_threads(t);
      const Kernels& k = kernels_for(backend);
      // A batched product stays fp32 at Precision::bf16 (the step's batched products are the
      // attention's, fused in fp32), so Kernels::gemm would time fp32 again: its bf16 row times
      // headlab's bf16 GEMM itself, to show what bf16 would give at that shape ("in_step": false).
      const bool direct = precision && d.batch > 1;
      const double s = seconds_per_call(
          [&] {
            if (direct)
              fast::gemm_bf16(c.d, a.data(), b.data(), out.data());
            else
              k.gemm(c.d, a.data(), b.data(), out.data());
          },
          o);
      json row = {{"shape", c.name},
                  {"m", d.m},
                  {"n", d.n},
                  {"k", d.k},
                  {"batch", d.batch},
                  {"backend", backend_name(backend)},
                  {"threads", t},
                  {"us_per_call", s * 1e6},
                  {"gflops", flops / s * 1e-9}};
      if (precision) row["precision"] = precision;
      if (direct) row["in_step"] = false;
      rows.push_back(std::move(row));
    };
    for (Backend backend : {Backend::reference, Backend::blas, Backend::onednn}) {
      if (backend == Backend::reference && flops > kReferenceMaxFlops) continue;
      for (int t : threads) {
        if (backend == Backend::reference && t != threads.front()) continue;  // single-threaded
        time(backend, t, nullptr);
      }
    }
    if (!bf16_supported()) continue;
    // The bf16 products (runtime.precision = "bf16"), operand rounding included.
    set_precision(Precision::bf16);
    for (int t : threads) time(Backend::onednn, t, "bf16");
    set_precision(Precision::fp32);
  }
  return rows;
}

// Softmax over [B*h*T, T] scores, LayerNorm over [B*T, d], GELU over the FFN's [B*T, 4d].
json bench_other_kernels(const KernelBenchOptions& o, const std::vector<int>& threads) {
  const int64_t sm_rows = 4096, sm_cols = 16, ln_rows = 2048, ln_cols = 64, n = 2048 * 256;
  Tensor x = filled(n), y = filled(n), dy = filled(n), dx = filled(n), g = filled(ln_cols),
         bt = filled(ln_cols), mean = filled(ln_rows), rstd = filled(ln_rows), dg = filled(ln_cols),
         db = filled(ln_cols);
  json rows = json::array();
  auto run = [&](const char* name, Backend backend, int t, auto&& f) {
    const double s = seconds_per_call(f, o);
    rows.push_back({{"kernel", name},
                    {"backend", backend_name(backend)},
                    {"threads", t},
                    {"us_per_call", s * 1e6}});
  };
  for (Backend backend : {Backend::reference, Backend::onednn})
    for (int t : threads) {
      if (backend == Backend::reference && t != threads.front()) continue;
      set_num_threads(t);
      const Kernels& k = kernels_for(backend);
      k.layer_norm_forward(x.data(), g.data(), bt.data(), y.data(), mean.data(), rstd.data(),
                           ln_rows, ln_cols, 1e-5f);
      run("softmax fwd 4096x16", backend, t,
          [&] { k.softmax_forward(x.data(), y.data(), sm_rows, sm_cols); });
      run("softmax bwd 4096x16", backend, t,
          [&] { k.softmax_backward(y.data(), dy.data(), dx.data(), sm_rows, sm_cols); });
      run("layer norm fwd 2048x64", backend, t, [&] {
        k.layer_norm_forward(x.data(), g.data(), bt.data(), y.data(), mean.data(), rstd.data(),
                             ln_rows, ln_cols, 1e-5f);
      });
      run("layer norm bwd 2048x64", backend, t, [&] {
        k.layer_norm_backward(x.data(), g.data(), mean.data(), rstd.data(), dy.data(), dx.data(),
                              dg.data(), db.data(), ln_rows, ln_cols);
      });
      run("gelu fwd 2048x256", backend, t, [&] { k.gelu_forward(x.data(), y.data(), n); });
      run("gelu bwd 2048x256", backend, t,
          [&] { k.gelu_backward(x.data(), dy.data(), dx.data(), n); });
    }
  return rows;
}

// The fused attention at the presets' shapes and the flagship's (training batch and evaluation
// batch), forward and backward, GFLOP/s counted from the products it stands for.
json bench_attention(const KernelBenchOptions& o, const std::vector<int>& threads) {
  struct Case {
    const char* name;
    int64_t b, h, t, d;
  };
  const Case cases[] = {{"S  64 x 4 heads, T 16, d 16", 64, 4, 16, 16},
                        {"M  64 x 8 heads, T 32, d 16", 64, 8, 32, 16},
                        {"L  32 x 8 heads, T 64, d 32", 32, 8, 64, 32},
                        {"flagship 32 x 8 heads, T 17, d 8", 32, 8, 17, 8},
                        {"flagship eval 256 x 4, T 17, d 16", 256, 4, 17, 16}};
  json rows = json::array();
  for (const Case& c : cases) {
    AttentionDesc d{.batch = c.b, .heads = c.h, .len = c.t, .dim = c.d};
    d.scale = 1.0f / std::sqrt(static_cast<float>(c.d));
    const int64_t n_qkv = c.b * c.t * 3 * c.h * c.d, n_p = c.b * c.h * c.t * c.t;
    Tensor qkv = filled(n_qkv), p = filled(n_p), out = filled(c.b * c.t * c.h * c.d),
           dout = filled(c.b * c.t * c.h * c.d), dqkv = filled(n_qkv);
    for (bool backward : {false, true}) {
      double flops = 0.0;
      for (const GemmDesc& g : attention_gemms(d, backward))
        flops += 2.0 * g.m * g.n * g.k * g.batch;
      for (int t : threads) {
        set_num_threads(t);
        const Kernels& k = kernels_for(Backend::onednn);
        const double s = seconds_per_call(
            [&] {
              if (backward)
                k.attention_backward(d, qkv.data(), p.data(), nullptr, dout.data(), dqkv.data(),
                                     false);
              else
                k.attention_forward(d, qkv.data(), p.data(), nullptr, out.data());
            },
            o);
        rows.push_back({{"shape", std::string(c.name) + (backward ? " bwd" : " fwd")},
                        {"threads", t},
                        {"us_per_call", s * 1e6},
                        {"gflops", flops / s * 1e-9}});
      }
    }
  }
  return rows;
}

}  // namespace

json run_kernels_bench(const KernelBenchOptions& o) {
  const std::vector<int> threads = thread_counts(o);
  json report{{"mode", "kernels"}, {"reps", o.reps}};
  report["peak"] = json::array();
  for (const FmaPeak& p : fma_peaks(threads))
    report["peak"].push_back({{"threads", p.threads}, {"isa", p.isa}, {"gflops", p.gflops}});
  report["bf16_peak"] = json::array();
  for (const FmaPeak& p : bf16_peaks(threads))
    report["bf16_peak"].push_back({{"threads", p.threads}, {"isa", p.isa}, {"gflops", p.gflops}});
  report["matmul"] = bench_matmuls(o, threads);
  report["kernels"] = bench_other_kernels(o, threads);
  report["attention"] = bench_attention(o, threads);
  return report;
}

}  // namespace headlab::bench
