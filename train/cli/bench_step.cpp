// `headlab bench --preset`: the training-step benchmark (see bench_step.h).

#include "train/cli/bench_step.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <map>
#include <span>
#include <tuple>
#include <vector>

#include <fmt/core.h>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "core/error.h"
#include "core/kernels/kernels.h"
#include "core/rng.h"
#include "core/storage.h"
#include "core/tensor.h"
#include "core/threads.h"
#include "layers/encoder.h"
#include "optim/adam.h"
#include "train/cli/alloc_counter.h"
#include "train/cli/fma_peak.h"

namespace headlab::cli {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

struct Preset {
  const char* name;
  int64_t vocab, seq, d_model, heads, batch, layers;
  int warmup, steps;
};

// As CONFIGS in torch_reference.py; warm-up and step counts keep each run to seconds.
constexpr Preset kPresets[] = {
    {"S", 32, 16, 64, 4, 64, 2, 20, 200},
    {"M", 32, 32, 128, 8, 64, 2, 10, 100},
    {"L", 32, 64, 256, 8, 32, 4, 5, 20},
};
constexpr int64_t kFfnMult = 4;

const Preset& find_preset(const std::string& name) {
  for (const Preset& p : kPresets)
    if (name == p.name) return p;
  fail("bench: unknown preset '{}' (known: S, M, L)", name);
}

// The reference's analytic matmul FLOPs of one forward pass (a multiply-add is 2 FLOPs); its
// training step counts 3x (backward ~ 2x forward).
double forward_flops(const Preset& p) {
  const double n = static_cast<double>(p.batch * p.seq), d = static_cast<double>(p.d_model);
  const double per_layer = 2 * n * d * d * 4 + 2 * n * static_cast<double>(p.seq) * d * 2 +
                           2 * n * d * kFfnMult * d * 2;
  return static_cast<double>(p.layers) * per_layer + 2 * n * d * static_cast<double>(p.vocab);
}

// Python's statistics.quantiles(data, n=10) (method "exclusive"), so p10/p90 mean the same as
// in the reference. `sorted` has at least 2 values.
double decile(const std::vector<double>& sorted, int i) {
  const int64_t ld = static_cast<int64_t>(sorted.size()), m = ld + 1, n = 10;
  int64_t j = i * m / n;
  j = std::clamp<int64_t>(j, 1, ld - 1);
  const int64_t delta = i * m - j * n;
  return (sorted[j - 1] * static_cast<double>(n - delta) + sorted[j] * static_cast<double>(delta)) /
         static_cast<double>(n);
}

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : 0.5 * (v[h - 1] + v[h]);
}

// Other processes' CPU time during an interval: the machine's busy time (from /proc/stat) minus
// this process's CPU time, as the reference measures it. A step is clean when that is below one
// clock tick.
class ContentionMonitor {
 public:
  ContentionMonitor() : fd_(::open("/proc/stat", O_RDONLY | O_CLOEXEC)), hz_(sysconf(_SC_CLK_TCK)) {}
  ~ContentionMonitor() {
    if (fd_ >= 0) ::close(fd_);
  }
  ContentionMonitor(const ContentionMonitor&) = delete;
  ContentionMonitor& operator=(const ContentionMonitor&) = delete;

  // Busy seconds of the machine minus this process's CPU seconds, so far.
  double foreign_now() const { return busy_seconds() - own_cpu_seconds(); }
  double tick() const { return 1.0 / static_cast<double>(hz_); }
  bool available() const { return fd_ >= 0; }

 private:
  double busy_seconds() const {
    if (fd_ < 0) return 0.0;
    char buf[512];
    const ssize_t n = ::pread(fd_, buf, sizeof buf - 1, 0);
    if (n <= 0) return 0.0;
    buf[n] = '\0';
    // "cpu  user nice system idle iowait irq softirq steal ..."
    unsigned long long v[8] = {};
    if (std::sscanf(buf, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
                    &v[4], &v[5], &v[6], &v[7]) != 8)
      return 0.0;
    unsigned long long busy = 0;
    for (int i = 0; i < 8; ++i)
      if (i != 3 && i != 4) busy += v[i];
    return static_cast<double>(busy) / static_cast<double>(hz_);
  }
  static double own_cpu_seconds() {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
  }

  int fd_;
  long hz_;
};

double peak_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

// Floats a GEMM operand spans: `batch` items `stride` apart, each `rows` rows `ld` apart of
// `cols` values.
int64_t operand_extent(int64_t batch, int64_t stride, int64_t rows, int64_t cols, int64_t ld) {
  if (batch == 0 || rows == 0 || cols == 0) return 0;
  return (batch - 1) * stride + (rows - 1) * ld + cols;
}

using GemmKey = std::tuple<bool, bool, int64_t, int64_t, int64_t, float, float, int64_t, int64_t,
                           int64_t, int64_t, int64_t, int64_t, int64_t>;
GemmKey key_of(const GemmDesc& g) {
  const GemmDesc d = g.resolved();
  return {d.trans_a, d.trans_b, d.m,     d.n,        d.k,        d.alpha,    d.beta,
          d.lda,     d.ldb,     d.ldc,   d.batch,    d.stride_a, d.stride_b, d.stride_c};
}

// Collects the descriptors of the products the kernels run (fused attention included).
struct GemmRecorder final : GemmObserver {
  std::vector<GemmDesc> descs;
  void on_gemm(const GemmDesc& d) override { descs.push_back(d); }
};

struct GemmOnly {
  double ms = 0.0;
  int64_t calls = 0;
  json shapes = json::array();  // per distinct descriptor: count and median us per call
};

// Times every distinct descriptor of `descs` on the active backend (median of `reps` timed
// batches after a warm-up call) and sums count x median. Operands are shared buffers of small
// values (beta = 1 accumulation stays finite).
GemmOnly time_gemms(const std::vector<GemmDesc>& descs, int reps) {
  std::map<GemmKey, std::pair<GemmDesc, int64_t>> distinct;
  int64_t max_a = 1, max_b = 1, max_c = 1;
  for (const GemmDesc& g : descs) {
    auto [it, fresh] = distinct.try_emplace(key_of(g), g, 0);
    ++it->second.second;
    const GemmDesc d = g.resolved();
    max_a = std::max(max_a, operand_extent(d.batch, d.stride_a, d.trans_a ? d.k : d.m,
                                           d.trans_a ? d.m : d.k, d.lda));
    max_b = std::max(max_b, operand_extent(d.batch, d.stride_b, d.trans_b ? d.n : d.k,
                                           d.trans_b ? d.k : d.n, d.ldb));
    max_c = std::max(max_c, operand_extent(d.batch, d.stride_c, d.m, d.n, d.ldc));
  }
  auto filled = [](int64_t n) {
    Tensor t = Tensor::empty({n});
    for (int64_t i = 0; i < n; ++i) t[i] = static_cast<float>((i * 7919) % 97) * 1e-4f - 0.005f;
    return t;
  };
  Tensor a = filled(max_a), b = filled(max_b), c = filled(max_c);
  const Kernels& k = kernels();
  GemmOnly out;
  for (const auto& [key, entry] : distinct) {
    const auto& [d, count] = entry;
    k.gemm(d, a.data(), b.data(), c.data());  // creates a cached primitive
    // Enough calls per timed batch to last ~2 ms, so the clock's resolution does not matter.
    const auto t0 = Clock::now();
    k.gemm(d, a.data(), b.data(), c.data());
    const double once = std::chrono::duration<double>(Clock::now() - t0).count();
    const int64_t iters = std::clamp<int64_t>(static_cast<int64_t>(2e-3 / (once + 1e-9)), 1, 1000);
    std::vector<double> per_call;
    for (int r = 0; r < reps; ++r) {
      const auto s0 = Clock::now();
      for (int64_t i = 0; i < iters; ++i) k.gemm(d, a.data(), b.data(), c.data());
      per_call.push_back(std::chrono::duration<double>(Clock::now() - s0).count() /
                         static_cast<double>(iters));
    }
    const double s = median(per_call);
    out.ms += 1e3 * s * static_cast<double>(count);
    out.calls += count;
    const GemmDesc r = d.resolved();
    out.shapes.push_back({{"m", r.m}, {"n", r.n}, {"k", r.k}, {"batch", r.batch},
                          {"trans_a", r.trans_a}, {"trans_b", r.trans_b}, {"beta", r.beta},
                          {"lda", r.lda}, {"ldb", r.ldb}, {"ldc", r.ldc}, {"count", count},
                          {"us_per_call", 1e6 * s},
                          {"gflops", 2.0 * static_cast<double>(r.m * r.n * r.k * r.batch) / s * 1e-9}});
  }
  return out;
}

}  // namespace

void add_step_bench_options(CLI::App& bench, StepBenchOptions& o) {
  bench.add_option("--preset", o.preset,
                   "Time the training step of the PyTorch reference's encoder: S, M or L")
      ->check(CLI::IsMember({"S", "M", "L"}));
  bench.add_option("--steps", o.steps, "Timed training steps (default: S 200, M 100, L 20)")
      ->check(CLI::Range(2, 1000000));
  bench.add_option("--warmup", o.warmup, "Warm-up steps before timing (default: S 20, M 10, L 5)")
      ->check(CLI::Range(1, 1000000));
  bench.add_option("--backend", o.backend, "Kernel backend for --preset: auto, reference, blas, onednn");
  bench.add_option("--seed", o.seed, "Seed of the parameters and the batch (--preset)")
      ->check(CLI::Range(0, 1 << 30));
}

json run_step_bench(const StepBenchOptions& o, int threads_option) {
  const Preset& p = find_preset(o.preset);
  const int threads = threads_option > 0 ? threads_option : 1;
  const int warmup = o.warmup > 0 ? o.warmup : p.warmup;
  const int steps = o.steps > 0 ? o.steps : p.steps;
  set_backend(parse_backend(o.backend));
  set_num_threads(threads);

  EncoderOptions eo;
  eo.vocab_sizes = {p.vocab};
  eo.max_len = p.seq;
  eo.d_model = p.d_model;
  eo.heads = p.heads;
  eo.layers = p.layers;
  eo.d_ff = kFfnMult * p.d_model;
  eo.num_classes = p.vocab;
  eo.activation = Activation::relu;
  eo.norm = NormPosition::post;
  eo.positions = PositionKind::learned;
  eo.embed_init_std = 1.0f;  // nn.Embedding
  eo.pos_init_std = 0.02f;   // torch.randn(T, D) * 0.02
  eo.dropout = 0.0f;
  eo.attn_dropout = 0.0f;
  Rng init(static_cast<uint64_t>(o.seed));
  Encoder model(eo, init);
  const NamedParameters params = model.named_parameters();
  int64_t n_params = 0;
  for (const auto& np : params) n_params += np.var.numel();
  AdamOptions ao;
  ao.lr = 1e-3;
  Adam adam(params, ao);

  // A learnable task: the next token of a fixed random batch (cyclic), as the reference.
  const int64_t B = p.batch, T = p.seq;
  std::vector<int32_t> ids(static_cast<size_t>(B * T)), targets(ids.size());
  Rng data(static_cast<uint64_t>(o.seed) + 1);
  for (auto& id : ids) id = static_cast<int32_t>(data.below(static_cast<uint64_t>(p.vocab)));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) targets[b * T + t] = ids[b * T + (t + 1) % T];
  const std::span<const int32_t> feature(ids);

  auto step = [&] {
    adam.zero_grad();
    EncoderOutput out = model.forward({feature}, B, T);
    Var loss = cross_entropy(out.logits, targets);
    loss.backward();
    adam.step();
    return loss.value()[0];
  };

  ContentionMonitor monitor;
  model.train();
  float loss_first = 0.0f, loss_last = 0.0f;
  for (int i = 0; i < warmup; ++i) {
    const float l = step();
    if (i == 0) loss_first = l;
  }
  const int64_t new_before = operator_new_calls();
  const size_t pool_before = storage_pool_stats().heap_allocations;
  std::vector<double> times, clean;
  times.reserve(static_cast<size_t>(steps));
  clean.reserve(static_cast<size_t>(steps));
  double foreign_total = 0.0;
  for (int i = 0; i < steps; ++i) {
    const double f0 = monitor.foreign_now();
    const auto t0 = Clock::now();
    loss_last = step();
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    const double foreign = monitor.foreign_now() - f0;
    times.push_back(ms);
    foreign_total += std::max(0.0, foreign);
    if (foreign < monitor.tick()) clean.push_back(ms);
  }
  const int64_t new_calls = operator_new_calls() - new_before;
  const size_t pool_allocs = storage_pool_stats().heap_allocations - pool_before;

  // Inference forward: eval mode, no tape.
  std::vector<double> infer, infer_clean;
  {
    NoGradGuard no_grad;
    model.eval();
    for (int i = 0; i < warmup + steps; ++i) {
      const double f0 = monitor.foreign_now();
      const auto t0 = Clock::now();
      EncoderOutput out = model.forward({feature}, B, T);
      const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      if (i < warmup) continue;
      infer.push_back(ms);
      if (monitor.foreign_now() - f0 < monitor.tick()) infer_clean.push_back(ms);
    }
    model.train();
  }
  const double rss_mb = peak_rss_mb();

  // GEMM-only: the descriptors of one more step, each timed alone.
  GemmRecorder recorder;
  set_gemm_observer(&recorder);
  step();
  set_gemm_observer(nullptr);
  const std::vector<GemmDesc>& descs = recorder.descs;
  const GemmOnly gemm = time_gemms(descs, 5);

  std::vector<double> sorted = times;
  std::sort(sorted.begin(), sorted.end());
  const double med = median(times);
  const double fwd = forward_flops(p), train = 3.0 * fwd;
  const double infer_med = median(infer);
  double mean = 0.0;
  for (double t : times) mean += t / static_cast<double>(times.size());
  const double per_step = 1.0 / static_cast<double>(steps);
  const double peak = fma_peak_gflops_per_core();
  const double achieved = train / (med * 1e-3) * 1e-9;
  const BlasInfo blas = blas_info();
  json r{
      {"bench", "headlab_step"},
      {"preset", p.name},
      {"config", p.name},
      {"vocab", p.vocab},
      {"seq", p.seq},
      {"d_model", p.d_model},
      {"heads", p.heads},
      {"batch", p.batch},
      {"layers", p.layers},
      {"ffn_mult", kFfnMult},
      {"threads", threads},
      {"backend", backend_name(current_backend())},
      {"openblas_parallel", blas.parallel},
      {"params", n_params},
      {"steps", steps},
      {"warmup", warmup},
      {"train_step_ms_median", med},
      {"train_step_ms_mean", mean},
      {"train_step_ms_p10", decile(sorted, 1)},
      {"train_step_ms_p90", decile(sorted, 9)},
      {"train_step_ms_min", sorted.front()},
      {"steps_clean", clean.size()},
      {"train_step_ms_median_clean", clean.empty() ? json() : json(median(clean))},
      {"foreign_cpu_s_during_train", foreign_total},
      {"infer_fwd_ms_median", infer_med},
      {"infer_steps_clean", infer_clean.size()},
      {"infer_fwd_ms_median_clean", infer_clean.empty() ? json() : json(median(infer_clean))},
      {"fwd_matmul_flops", fwd},
      {"train_flops_approx", train},
      {"achieved_gflops", achieved},
      {"fma_peak_gflops_per_core", peak},
      {"fraction_of_fma_peak", peak > 0 ? achieved / (peak * threads) : 0.0},
      {"infer_gflops_per_s", fwd / (infer_med * 1e-3) * 1e-9},
      {"gemm_only_ms", gemm.ms},
      {"gemm_calls_per_step", gemm.calls},
      {"step_over_gemm_only", gemm.ms > 0 ? med / gemm.ms : 0.0},
      {"gemm_shapes", gemm.shapes},
      {"peak_rss_mb", rss_mb},
      {"allocations_per_step",
       static_cast<double>(new_calls + static_cast<int64_t>(pool_allocs)) * per_step},
      {"operator_new_per_step", static_cast<double>(new_calls) * per_step},
      {"pool_heap_allocations_per_step", static_cast<double>(pool_allocs) * per_step},
      {"contention_monitor", monitor.available()},
      {"loss_first", loss_first},
      {"loss_last", loss_last},
  };
  return r;
}

void print_step_bench(const json& r) {
  fmt::print("training step, preset {} (seq {}, d_model {}, heads {}, batch {}, layers {}), "
             "{} thread(s), backend {}\n",
             r["preset"].get<std::string>(), r["seq"].get<int64_t>(), r["d_model"].get<int64_t>(),
             r["heads"].get<int64_t>(), r["batch"].get<int64_t>(), r["layers"].get<int64_t>(),
             r["threads"].get<int>(), r["backend"].get<std::string>());
  fmt::print("  step ms     median {:.3f}  p10 {:.3f}  p90 {:.3f}  ({} steps, {} clean)\n",
             r["train_step_ms_median"].get<double>(), r["train_step_ms_p10"].get<double>(),
             r["train_step_ms_p90"].get<double>(), r["steps"].get<int>(),
             r["steps_clean"].get<size_t>());
  fmt::print("  inference   {:.3f} ms per forward\n", r["infer_fwd_ms_median"].get<double>());
  fmt::print("  achieved    {:.1f} GFLOP/s ({:.3f} GFLOP per step), {:.0f}% of the FMA peak "
             "({:.1f} GFLOP/s per core)\n",
             r["achieved_gflops"].get<double>(), r["train_flops_approx"].get<double>() * 1e-9,
             100.0 * r["fraction_of_fma_peak"].get<double>(),
             r["fma_peak_gflops_per_core"].get<double>());
  fmt::print("  GEMM-only   {:.3f} ms ({} calls); step / GEMM-only = {:.2f}\n",
             r["gemm_only_ms"].get<double>(), r["gemm_calls_per_step"].get<int64_t>(),
             r["step_over_gemm_only"].get<double>());
  fmt::print("  peak RSS    {:.1f} MB\n", r["peak_rss_mb"].get<double>());
  fmt::print("  heap allocations per step {:.2f} (operator new {:.2f}, new pooled buffers {:.2f})\n",
             r["allocations_per_step"].get<double>(), r["operator_new_per_step"].get<double>(),
             r["pool_heap_allocations_per_step"].get<double>());
  fmt::print("  loss        {:.4f} -> {:.4f}\n", r["loss_first"].get<double>(),
             r["loss_last"].get<double>());
}

}  // namespace headlab::cli
