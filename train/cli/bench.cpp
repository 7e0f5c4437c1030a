// `headlab bench`: flags and printing of the speed measurements; the measuring itself is the
// benchmark harness in bench/ (a library of its own, outside the product).
//
//   --kernels        GFLOP/s of matmul at the encoder's shapes per backend and thread count,
//                    beside the FMA peak; then time per call of the other kernels.
//   --preset S|M|L   the training step of the PyTorch reference's encoder; under
//                    `mpirun -np N` data-parallel over N ranks (rank 0 prints).
//   --config FILE    the training step of a config (with --set overrides), through the trainer.
//   --profile        with --preset or --config: one step split by op (forward ops, backward
//                    entries, optimizer regions), each beside the GEMM-only time of its products.
//   --reduce         under mpirun: the gradient reduction as the step times it, 1 KiB to 64 MiB
//                    and a preset's own buffers (--preset, default L), alone and inside that
//                    preset's training step, and the figures that calibrate the cost model of
//                    docs/distributed.md (bench/dist_cost_model.py --check).
//
// Adding a mode: a bench/<mode>.{h,cpp} that returns the JSON it reports, its flags and its
// printer here, and one branch in the command's callback.

#include <algorithm>
#include <memory>
#include <string>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "bench/kernels.h"
#include "bench/reduce.h"
#include "bench/step.h"
#include "core/error.h"
#include "core/kernels/kernels.h"
#include "core/threads.h"
#include "train/cli/commands.h"
#include "train/cli/job.h"
#include "train/cli/options.h"

namespace headlab::cli {
namespace {

using nlohmann::json;

struct BenchOptions {
  bool kernels = false;
  bool reduce = false;
  bool profile = false;
  bool json = false;
  bench::KernelBenchOptions kernel;  // --threads, --reps
  bench::StepBenchOptions step;      // --preset and its options
};

void add_step_options(CLI::App& cmd, bench::StepBenchOptions& o) {
  cmd.add_option("--preset", o.preset,
                 "Time the training step of the PyTorch reference's encoder: S, M or L")
      ->check(CLI::IsMember({"S", "M", "L"}));
  add_path_option(cmd, "--config", o.config,
                  "Time the training step of this config (its task, batch, model and optimizer)",
                  "a config file");
  add_set_option(cmd, o.sets, "Override a key of --config, KEY=VALUE");
  add_int_option(cmd, "--steps", o.steps, 2, 1000000,
                 "Timed training steps (default: S 200, M 100, L 20, a config 100)");
  add_int_option(cmd, "--warmup", o.warmup, 1, 1000000,
                 "Warm-up steps before timing (default: S 20, M 10, L 5, a config 10)");
  add_string_option(
      cmd, "--backend", o.backend,
      "Kernel backend: auto, reference, blas, onednn (default: auto, or the config's)",
      "one of auto, reference, blas, onednn");
  add_string_option(cmd, "--precision", o.precision,
                    "Matrix products: fp32, bf16, bf16_or_fp32 (default: fp32, or the config's "
                    "runtime.precision)",
                    "one of fp32, bf16, bf16_or_fp32");
  add_int_option(cmd, "--seed", o.seed, 0, 1 << 30,
                 "Seed of the parameters and the batch (--preset)");
  cmd.add_flag_callback(
      "--no-overlap", [&o] { o.overlap = false; },
      "--preset under mpirun: start the gradient reduction after the backward instead of "
      "during it (the step before the overlap, for comparison)");
  cmd.add_flag("--shard-optimizer", o.shard_optimizer,
               "--preset under mpirun: shard Adam's state over the ranks (ZeRO-1, as "
               "runtime.shard_optimizer), each owner broadcasting its parameters after the step");
}

// "preset M (seq 32, d_model 128, heads 8, batch 64, layers 2), 1 thread(s), backend onednn"
std::string workload_line(const json& r) {
  const std::string what = r.contains("preset") ? "preset " + r["preset"].get<std::string>()
                                                : "config " + r["config"].get<std::string>();
  return fmt::format(
      "{} (seq {}, d_model {}, heads {}, batch {}, layers {}), {} thread(s), "
      "backend {}, precision {}",
      what, r["seq"].get<int64_t>(), r["d_model"].get<int64_t>(), r["heads"].get<int64_t>(),
      r["batch"].get<int64_t>(), r["layers"].get<int64_t>(), r["threads"].get<int>(),
      r["backend"].get<std::string>(), r.value("precision", std::string("fp32")));
}

void print_step_bench(const json& r) {
  fmt::print("training step, {}\n", workload_line(r));
  fmt::print(
      "  step ms     median {:.3f}  p10 {:.3f}  p90 {:.3f}  ({} steps, {} clean); "
      "thread CPU {:.3f}\n",
      r["train_step_ms_median"].get<double>(), r["train_step_ms_p10"].get<double>(),
      r["train_step_ms_p90"].get<double>(), r["steps"].get<int>(), r["steps_clean"].get<size_t>(),
      r["train_step_cpu_ms_median"].get<double>());
  fmt::print("  inference   {:.3f} ms per forward\n", r["infer_fwd_ms_median"].get<double>());
  fmt::print(
      "  achieved    {:.1f} GFLOP/s ({:.3f} GFLOP per step), {:.0f}% of the FMA peak "
      "({:.1f} GFLOP/s per core)\n",
      r["achieved_gflops"].get<double>(), r["train_flops_approx"].get<double>() * 1e-9,
      100.0 * r["fraction_of_fma_peak"].get<double>(), r["fma_peak_gflops_per_core"].get<double>());
  if (r.contains("fraction_of_bf16_peak"))
    fmt::print("              {:.0f}% of the bf16 dot-product peak ({:.1f} GFLOP/s per core)\n",
               100.0 * r["fraction_of_bf16_peak"].get<double>(),
               r["bf16_peak_gflops_per_core"].get<double>());
  fmt::print("  GEMM-only   {:.3f} ms ({} calls); step / GEMM-only = {:.2f}\n",
             r["gemm_only_ms"].get<double>(), r["gemm_calls_per_step"].get<int64_t>(),
             r["step_over_gemm_only"].get<double>());
  fmt::print("  peak RSS    {:.1f} MB\n", r["peak_rss_mb"].get<double>());
  fmt::print(
      "  heap allocations per step {:.2f} (operator new {:.2f}, new pooled buffers {:.2f})\n",
      r["allocations_per_step"].get<double>(), r["operator_new_per_step"].get<double>(),
      r["pool_heap_allocations_per_step"].get<double>());
  fmt::print("  loss        {:.4f} -> {:.4f}\n", r["loss_first"].get<double>(),
             r["loss_last"].get<double>());
  if (r.value("ranks", 1) > 1)
    fmt::print("  ranks       {} x batch {}; gradient reduction {:.3f} ms per step (median)\n",
               r["ranks"].get<int64_t>(), r["batch_per_rank"].get<int64_t>(),
               r["allreduce_ms_median"].get<double>());
  if (r.value("shard_optimizer", false))
    fmt::print("  optimizer   sharded (ZeRO-1): {:.2f} MB of Adam state on rank 0\n",
               static_cast<double>(r["optimizer_state_bytes_per_rank"].get<int64_t>()) / 1e6);
}

void print_reduce_table(const json& r) {
  fmt::print(
      "gradient reduction over {} ranks (GradientReducer::finish as the step times it, median "
      "of {}): chain in rank order + broadcast\n",
      r["ranks"].get<int>(), r["reps"].get<int>());
  for (const json& row : r["rows"])
    fmt::print("  {:>12} bytes {:10.3f} ms (fastest {:.3f})\n", row["bytes"].get<int64_t>(),
               row["ms"].get<double>(), row["ms_min"].get<double>());
  const json& p = r["preset"];
  fmt::print("preset {}: {} bytes in {} buffers, chunks of {} bytes\n",
             p["preset"].get<std::string>(), p["bytes"].get<int64_t>(), p["buffers"].get<int64_t>(),
             p["chunk_bytes"].get<int64_t>());
  fmt::print("  alone        {:.3f} ms\n", p["isolated_ms"].get<double>());
  fmt::print(
      "  in the step  {:.3f} ms (median of {} steps): the last rank began {:.3f} ms after rank "
      "0, the rest {:.3f} ms\n",
      p["in_step_ms"].get<double>(), p["steps"].get<int>(), p["in_step_wait_ms"].get<double>(),
      p["in_step_transfer_ms"].get<double>());
  const json& c = r["calibration"];
  fmt::print(
      "calibration: alpha {:.1f} us, beta {:.2f} GB/s ({} bytes rank 0 to 1), gamma {:.2f} GB/s "
      "(add) {:.2f} GB/s (copy), broadcast of the preset's gradient {:.3f} ms\n",
      c["alpha_us"].get<double>(), c["beta_gb_per_s"].get<double>(),
      c["beta_message_bytes"].get<int64_t>(), c["gamma_add_gb_per_s"].get<double>(),
      c["gamma_copy_gb_per_s"].get<double>(), c["bcast_ms"].get<double>());
  fmt::print("  predicted: bench/dist_cost_model.py --check FILE (this report, --json)\n");
}

void print_profile(const json& r) {
  fmt::print("profile of the training step, {}\n", workload_line(r));
  fmt::print(
      "  {} profiled steps: step median {:.3f} ms with the hook installed; rows sum to "
      "{:.3f} ms, their GEMM-only time to {:.3f} ms\n\n",
      r["profile_steps"].get<int>(), r["step_ms_median"].get<double>(),
      r["rows_ms_total"].get<double>(), r["gemm_only_ms"].get<double>());
  fmt::print("  {:<9} {:<26} {:>6} {:>9} {:>7} {:>10} {:>8}\n", "kind", "op", "calls", "ms",
             "share", "GEMM-only", "/ GEMM");
  for (const json& row : r["rows"]) {
    const double ms = row["ms"].get<double>(), gemm = row["gemm_only_ms"].get<double>();
    fmt::print("  {:<9} {:<26} {:>6.1f} {:>9.3f} {:>6.1f}% {:>10} {:>8}\n",
               row["kind"].get<std::string>(), row["op"].get<std::string>(),
               row["calls"].get<double>(), ms, 100.0 * row["share"].get<double>(),
               gemm > 0 ? fmt::format("{:.3f}", gemm) : "-",
               gemm > 0 ? fmt::format("{:.2f}", ms / gemm) : "-");
  }
}

void print_kernel_tables(const json& report) {
  const BlasInfo blas = blas_info();
  fmt::print("kernel benchmark (median of {} repetitions); OpenBLAS {} build, core {}\n",
             report["reps"].get<int>(), blas.parallel, blas.core_name);
  for (const json& p : report["peak"])
    fmt::print("peak: FMA {:<9} {} thread(s): {:7.1f} GFLOP/s\n", p["isa"].get<std::string>(),
               p["threads"].get<int>(), p["gflops"].get<double>());
  for (const json& p : report.value("bf16_peak", json::array()))
    fmt::print("peak: bf16 dot {:<10} {} thread(s): {:7.1f} GFLOP/s\n", p["isa"].get<std::string>(),
               p["threads"].get<int>(), p["gflops"].get<double>());
  fmt::print("\n{:<34} {:>11} {:>3} {:>10} {:>9} {:>7}\n", "matmul m x n x k", "backend", "thr",
             "us/call", "GFLOP/s", "% peak");
  for (const json& r : report["matmul"]) {
    // fp32 rows against the widest ISA's FMA peak, bf16 rows against the bf16 dot-product peak
    const bool bf16 = r.value("precision", std::string("fp32")) == "bf16";
    double peak = 0.0;
    for (const json& p : report[bf16 ? "bf16_peak" : "peak"])
      if (p["threads"] == r["threads"]) peak = std::max(peak, p["gflops"].get<double>());
    fmt::print("{:<34} {:>11} {:>3} {:>10.1f} {:>9.1f} {:>6.0f}%\n", r["shape"].get<std::string>(),
               r["backend"].get<std::string>() + (bf16 ? " bf16" : "") +
                   (r.value("in_step", true) ? "" : "*"),
               r["threads"].get<int>(), r["us_per_call"].get<double>(), r["gflops"].get<double>(),
               peak > 0 ? 100.0 * r["gflops"].get<double>() / peak : 0.0);
  }
  if (std::ranges::any_of(report["matmul"],
                          [](const json& r) { return !r.value("in_step", true); }))
    fmt::print(
        "* headlab's bf16 GEMM at a batched shape, which the step runs in fp32 (bf16 products "
        "are single ones; the attention's are fused in fp32)\n");
  fmt::print("\n{:<34} {:>9} {:>3} {:>10}\n", "kernel", "backend", "thr", "us/call");
  for (const json& r : report["kernels"])
    fmt::print("{:<34} {:>9} {:>3} {:>10.1f}\n", r["kernel"].get<std::string>(),
               r["backend"].get<std::string>(), r["threads"].get<int>(),
               r["us_per_call"].get<double>());
  fmt::print("\n{:<40} {:>3} {:>10} {:>9} {:>7}\n", "fused attention (batch x heads)", "thr",
             "us/call", "GFLOP/s", "% peak");
  for (const json& r : report["attention"]) {
    double peak = 0.0;
    for (const json& p : report["peak"])
      if (p["threads"] == r["threads"]) peak = std::max(peak, p["gflops"].get<double>());
    fmt::print("{:<40} {:>3} {:>10.1f} {:>9.1f} {:>6.0f}%\n", r["shape"].get<std::string>(),
               r["threads"].get<int>(), r["us_per_call"].get<double>(), r["gflops"].get<double>(),
               peak > 0 ? 100.0 * r["gflops"].get<double>() / peak : 0.0);
  }
}

}  // namespace

void add_bench_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand(
      "bench", "Measure speed: kernel GFLOP/s (--kernels) or the training step (--preset)");
  auto opts = std::make_shared<BenchOptions>();
  add_step_options(*cmd, opts->step);
  cmd->add_flag("--kernels", opts->kernels,
                "Matmul GFLOP/s at the encoder's shapes per backend and thread count, beside "
                "the FMA peak, and the other kernels' time per call");
  add_int_option(*cmd, "--threads", opts->kernel.threads, 0, 1024,
                 "Only this thread count (default: 1 and all cores)");
  add_int_option(*cmd, "--reps", opts->kernel.reps, 1, 1000,
                 "Timed repetitions per entry (median reported)");
  cmd->add_flag(
      "--reduce", opts->reduce,
      "Under mpirun: time the gradient reduction as the step does, alone (1 KiB to 64 MiB "
      "and --preset's buffers, default L) and inside the preset's step");
  cmd->add_flag("--json", opts->json, "Print one JSON object instead of tables");
  cmd->add_flag("--cpu-clock", opts->step.cpu_clock,
                "--profile on the thread's CPU clock (one thread on a shared machine)");
  cmd->add_flag("--profile", opts->profile,
                "With --preset or --config: one step's time by op (forward, backward, optimizer), "
                "each beside the GEMM-only time of its products");
  cmd->callback([cmd, opts, &exit_code] {
    exit_code = kOk;
    auto emit = [&](const json& r, auto print) {
      if (!speaks_for_job()) return;  // under mpirun rank 0 prints
      if (opts->json)
        fmt::print("{}\n", r.dump());  // one line: the last line on stdout
      else
        print(r);
    };
    bench::StepBenchOptions& step = opts->step;
    step.comm = &world();
    if (opts->reduce) {
      if (!step.config.empty()) fail("--reduce takes --preset S|M|L, not --config");
      bench::ReduceBenchOptions ro;
      if (!step.preset.empty()) ro.preset = step.preset;
      if (cmd->get_option("--reps")->count() > 0) ro.reps = opts->kernel.reps;
      ro.steps = step.steps;
      ro.warmup = step.warmup;
      return emit(bench::run_reduce_bench(world(), ro), print_reduce_table);
    }
    if (!step.preset.empty() || !step.config.empty()) {  // --threads 0: the workload's own
      if (opts->profile && world().size() > 1)
        fail("bench --profile runs as one process; run it without mpirun");
      if (opts->profile)
        return emit(bench::run_step_profile(step, opts->kernel.threads), print_profile);
      return emit(bench::run_step_bench(step, opts->kernel.threads), print_step_bench);
    }
    if (opts->profile) fail("bench: --profile needs --preset S|M|L or --config FILE");
    if (!opts->kernels)
      fail("bench: no mode given (expected --kernels, --preset S|M|L, --config FILE or --reduce)");
    if (world().size() > 1) fail("bench --kernels runs as one process; run it without mpirun");
    const json report = bench::run_kernels_bench(opts->kernel);
    set_num_threads(0);
    if (opts->json)
      fmt::print("{}\n", report.dump(2));
    else
      print_kernel_tables(report);
  });
}

}  // namespace headlab::cli
