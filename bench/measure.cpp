// The measuring half of `headlab bench --preset` (see bench/measure.h).

#include "bench/measure.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <vector>

#include "autograd/grad_mode.h"
#include "bench/alloc_counter.h"
#include "bench/fma_peak.h"
#include "bench/gemm_only.h"
#include "core/kernels/kernels.h"
#include "core/storage.h"
#include "core/tensor.h"

namespace headlab::bench {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
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
  ContentionMonitor()
      : fd_(::open("/proc/stat", O_RDONLY | O_CLOEXEC)), hz_(sysconf(_SC_CLK_TCK)) {}
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

struct Timed {
  explicit Timed(int calls) : count(static_cast<size_t>(calls)) {
    // The vectors' room is made here, before anything is counted.
    ms.reserve(static_cast<size_t>(count));
    clean.reserve(static_cast<size_t>(count));
    cpu_ms.reserve(static_cast<size_t>(count));
  }
  std::vector<double> ms, clean;  // every timed call, and those without foreign CPU use
  std::vector<double> cpu_ms;     // this thread's CPU time of every call
  double foreign_total = 0.0;
  size_t count;
};

double thread_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return 1e3 * static_cast<double>(ts.tv_sec) + 1e-6 * static_cast<double>(ts.tv_nsec);
}

// Runs f `warmup` times untimed, then t.count times timed into t.
template <class F>
void time_calls(F&& f, int warmup, Timed& t, const ContentionMonitor& monitor) {
  for (int i = 0; i < warmup; ++i) f();
  for (size_t i = 0; i < t.count; ++i) {
    const double f0 = monitor.foreign_now();
    const double c0 = thread_cpu_ms();
    const auto t0 = Clock::now();
    f();
    const double ms = ms_since(t0);
    t.cpu_ms.push_back(thread_cpu_ms() - c0);
    const double foreign = monitor.foreign_now() - f0;
    t.ms.push_back(ms);
    t.foreign_total += std::max(0.0, foreign);
    if (foreign < monitor.tick()) t.clean.push_back(ms);
  }
}

json median_or_null(const std::vector<double>& v) {
  return v.empty() ? json() : json(median(v));
}

}  // namespace

json measure_steps(const StepSubject& subject, const MeasureOptions& o) {
  ContentionMonitor monitor;
  float loss_first = 0.0f, loss_last = 0.0f;
  bool first = true, timing = false;
  std::vector<double> reduce_ms;
  auto step = [&] {
    loss_last = subject.train_step();
    if (first) loss_first = loss_last, first = false;
    if (timing && subject.reduce_seconds) reduce_ms.push_back(1e3 * subject.reduce_seconds());
  };
  // Allocations are counted over the timed steps only (the warm-up creates the caches).
  for (int i = 0; i < o.warmup; ++i) step();
  Timed train(o.steps), infer(o.steps);
  reduce_ms.reserve(static_cast<size_t>(o.steps));
  const int64_t new_before = operator_new_calls();
  const size_t pool_before = storage_pool_stats().heap_allocations;
  timing = true;
  time_calls(step, 0, train, monitor);
  timing = false;
  const int64_t new_calls = operator_new_calls() - new_before;
  const size_t pool_allocs = storage_pool_stats().heap_allocations - pool_before;
  {
    NoGradGuard no_grad;
    subject.set_training(false);
    time_calls(subject.forward, o.warmup, infer, monitor);
    subject.set_training(true);
  }
  const double rss_mb = peak_rss_mb();

  GemmRecorder recorder;  // GEMM-only: the products of one more step, each timed alone
  set_gemm_observer(&recorder);
  subject.train_step();
  set_gemm_observer(nullptr);
  GemmTimer timer;
  const GemmOnly gemm = time_gemms(recorder.descs, timer);

  std::vector<double> sorted = train.ms;
  std::sort(sorted.begin(), sorted.end());
  const double med = median(train.ms), infer_med = median(infer.ms);
  double mean = 0.0;
  for (double t : train.ms) mean += t / static_cast<double>(train.ms.size());
  const double per_step = 1.0 / static_cast<double>(o.steps);
  const double fwd = subject.forward_flops, train_flops = 3.0 * fwd;
  const double peak = fma_peak_gflops_per_core();
  const bool bf16 = current_precision() == Precision::bf16;
  const double bf16_peak = bf16 ? bf16_peak_gflops_per_core() : 0.0;
  const double achieved = train_flops / (med * 1e-3) * 1e-9;
  json r = {
      {"threads", o.threads},
      {"steps", o.steps},
      {"warmup", o.warmup},
      {"train_step_ms_median", med},
      {"train_step_ms_mean", mean},
      {"train_step_ms_p10", decile(sorted, 1)},
      {"train_step_ms_p90", decile(sorted, 9)},
      {"train_step_ms_min", sorted.front()},
      {"steps_clean", train.clean.size()},
      {"train_step_ms_median_clean", median_or_null(train.clean)},
      {"train_step_cpu_ms_median", median(train.cpu_ms)},
      {"foreign_cpu_s_during_train", train.foreign_total},
      {"infer_fwd_ms_median", infer_med},
      {"infer_steps_clean", infer.clean.size()},
      {"infer_fwd_ms_median_clean", median_or_null(infer.clean)},
      {"infer_fwd_cpu_ms_median", median(infer.cpu_ms)},
      {"fwd_matmul_flops", fwd},
      {"train_flops_approx", train_flops},
      {"achieved_gflops", achieved},
      {"fma_peak_gflops_per_core", peak},
      {"fraction_of_fma_peak", peak > 0 ? achieved / (peak * o.threads) : 0.0},
      {"precision", precision_name(current_precision())},
      {"infer_gflops_per_s", fwd / (infer_med * 1e-3) * 1e-9},
      {"gemm_only_ms", gemm.ms},
      {"gemm_calls_per_step", gemm.calls},
      {"gemm_flops_per_step", gemm.flops},
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
  if (bf16) {
    r["bf16_peak_gflops_per_core"] = bf16_peak;
    r["fraction_of_bf16_peak"] = bf16_peak > 0 ? achieved / (bf16_peak * o.threads) : 0.0;
  }
  if (!reduce_ms.empty()) r["allreduce_ms_median"] = median(reduce_ms);
  return r;
}

}  // namespace headlab::bench
