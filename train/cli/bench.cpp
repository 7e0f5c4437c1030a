// `headlab bench`: speed measurements, one function per mode.
//
//   --kernels   GFLOP/s of matmul at the encoder's shapes per backend and thread count, beside
//               the machine's FMA peak measured here; then time per call of the other kernels.
//
// Adding a mode (e.g. a training-step benchmark `--preset S|M|L`): give BenchOptions its field,
// register the flag or option in add_bench_command, write run_<mode>_bench(opts) returning the
// JSON it reports, and add it to the dispatch in the command's callback. Timing lives here, in
// the CLI, never in the library or the tests.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/kernels/kernels.h"
#include "core/tensor.h"
#include "core/threads.h"
#include "train/cli/bench_step.h"
#include "train/cli/commands.h"
#include "train/cli/fma_peak.h"

namespace headlab::cli {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

struct BenchOptions {
  bool kernels = false;
  int threads = 0;  // 0: every count from 1 to the hardware threads
  int reps = 5;     // timed repetitions; the median is reported
  double min_rep_seconds = 0.02;
  bool json = false;
};

std::vector<int> thread_counts(const BenchOptions& o) {
  if (o.threads > 0) return {o.threads};
  std::vector<int> counts{1};
  if (hardware_threads() > 1) counts.push_back(hardware_threads());
  return counts;
}

// Median seconds per call of f: iterations per repetition grow until one repetition lasts
// min_rep_seconds, after a warm-up call (which creates cached primitives).
template <class F>
double seconds_per_call(F&& f, const BenchOptions& o) {
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

json bench_matmuls(const BenchOptions& o, const std::vector<int>& threads) {
  constexpr double kReferenceMaxFlops = 1e7;  // the plain loops run ~1 GFLOP/s: small sizes only
  json rows = json::array();
  for (const MatmulCase& c : encoder_matmuls()) {
    const GemmDesc d = c.d.resolved();
    const double flops = 2.0 * d.m * d.n * d.k * d.batch;
    Tensor a = filled(d.batch * d.m * d.k), b = filled(d.batch * d.k * d.n),
           out = filled(d.batch * d.m * d.n);
    for (Backend backend : {Backend::reference, Backend::blas, Backend::onednn}) {
      if (backend == Backend::reference && flops > kReferenceMaxFlops) continue;
      for (int t : threads) {
        if (backend == Backend::reference && t != threads.front()) continue;  // single-threaded
        set_num_threads(t);
        const Kernels& k = kernels_for(backend);
        const double s = seconds_per_call([&] { k.gemm(c.d, a.data(), b.data(), out.data()); }, o);
        rows.push_back({{"shape", c.name},
                        {"m", d.m},
                        {"n", d.n},
                        {"k", d.k},
                        {"batch", d.batch},
                        {"backend", backend_name(backend)},
                        {"threads", t},
                        {"us_per_call", s * 1e6},
                        {"gflops", flops / s * 1e-9}});
      }
    }
  }
  return rows;
}

// Softmax over [B*h*T, T] scores, LayerNorm over [B*T, d], GELU over the FFN's [B*T, 4d].
json bench_other_kernels(const BenchOptions& o, const std::vector<int>& threads) {
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

void print_kernel_tables(const json& report) {
  const BlasInfo blas = blas_info();
  fmt::print("kernel benchmark (median of {} repetitions); OpenBLAS {} build, core {}\n",
             report["reps"].get<int>(), blas.parallel, blas.core_name);
  for (const json& p : report["peak"])
    fmt::print("peak: FMA {:<9} {} thread(s): {:7.1f} GFLOP/s\n", p["isa"].get<std::string>(),
               p["threads"].get<int>(), p["gflops"].get<double>());
  fmt::print("\n{:<34} {:>9} {:>3} {:>10} {:>9} {:>7}\n", "matmul m x n x k", "backend", "thr",
             "us/call", "GFLOP/s", "% peak");
  for (const json& r : report["matmul"]) {
    double peak = 0.0;  // the widest ISA's
    for (const json& p : report["peak"])
      if (p["threads"] == r["threads"]) peak = std::max(peak, p["gflops"].get<double>());
    fmt::print("{:<34} {:>9} {:>3} {:>10.1f} {:>9.1f} {:>6.0f}%\n", r["shape"].get<std::string>(),
               r["backend"].get<std::string>(), r["threads"].get<int>(),
               r["us_per_call"].get<double>(), r["gflops"].get<double>(),
               peak > 0 ? 100.0 * r["gflops"].get<double>() / peak : 0.0);
  }
  fmt::print("\n{:<34} {:>9} {:>3} {:>10}\n", "kernel", "backend", "thr", "us/call");
  for (const json& r : report["kernels"])
    fmt::print("{:<34} {:>9} {:>3} {:>10.1f}\n", r["kernel"].get<std::string>(),
               r["backend"].get<std::string>(), r["threads"].get<int>(),
               r["us_per_call"].get<double>());
}

json run_kernels_bench(const BenchOptions& o) {
  const std::vector<int> threads = thread_counts(o);
  json report{{"mode", "kernels"}, {"reps", o.reps}};
  report["peak"] = json::array();
  for (const FmaPeak& p : fma_peaks(threads))
    report["peak"].push_back({{"threads", p.threads}, {"isa", p.isa}, {"gflops", p.gflops}});
  report["matmul"] = bench_matmuls(o, threads);
  report["kernels"] = bench_other_kernels(o, threads);
  return report;
}

}  // namespace

void add_bench_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand(
      "bench", "Measure speed: kernel GFLOP/s (--kernels) or the training step (--preset)");
  auto opts = std::make_shared<BenchOptions>();
  auto step = std::make_shared<StepBenchOptions>();  // --preset mode (bench_step.h)
  add_step_bench_options(*cmd, *step);
  cmd->add_flag("--kernels", opts->kernels,
                "Matmul GFLOP/s at the encoder's shapes per backend and thread count, beside "
                "the FMA peak, and the other kernels' time per call");
  cmd->add_option("--threads", opts->threads, "Only this thread count (default: 1 and all cores)")
      ->check(CLI::Range(0, 1024));
  cmd->add_option("--reps", opts->reps, "Timed repetitions per entry (median reported)")
      ->check(CLI::Range(1, 1000));
  cmd->add_flag("--json", opts->json, "Print one JSON object instead of tables");
  cmd->callback([opts, step, &exit_code] {
    if (!step->preset.empty()) {  // training step; --threads 0 means 1 here
      const json r = run_step_bench(*step, opts->threads);
      if (opts->json)
        fmt::print("{}\n", r.dump());  // one line: the last line on stdout
      else
        print_step_bench(r);
      exit_code = kOk;
      return;
    }
    json report;
    if (opts->kernels) {
      report = run_kernels_bench(*opts);
    } else {
      fail("bench: no mode given (expected --kernels or --preset S|M|L)");
    }
    set_num_threads(0);
    if (opts->json) {
      fmt::print("{}\n", report.dump(2));
    } else if (report["mode"] == "kernels") {
      print_kernel_tables(report);
    }
    exit_code = kOk;
  });
}

}  // namespace headlab::cli
