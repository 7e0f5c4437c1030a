// The per-op profile of a training step (see bench/profile.h).

#include "bench/profile.h"

#include <algorithm>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "autograd/profile.h"
#include "bench/gemm_only.h"
#include "core/kernels/kernels.h"

namespace headlab::bench {
namespace {

using nlohmann::json;

// Milliseconds on the wall clock, or on this thread's CPU clock (which does not run while other
// processes have the core: the figure for one thread on a shared machine).
double now_ms(bool cpu) {
  timespec ts{};
  clock_gettime(cpu ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
  return 1e3 * static_cast<double>(ts.tv_sec) + 1e-6 * static_cast<double>(ts.tv_nsec);
}

constexpr const char* kOutside = "(outside ops)";

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : 0.5 * (v[h - 1] + v[h]);
}

struct Row {
  const char* kind;
  const char* name;
  double step_ms = 0.0;         // in the current step
  int64_t calls = 0;            // over all profiled steps
  std::vector<double> ms;       // per profiled step
  std::vector<GemmDesc> gemms;  // the products charged to it, in the GEMM pass
};

// Charges the time since the previous event to the row the event names; in the GEMM pass it
// charges the products seen since the previous event instead.
class StepProfiler final : public OpObserver, public GemmObserver {
 public:
  explicit StepProfiler(bool cpu_clock) : cpu_(cpu_clock) { rows_.reserve(256); }

  void begin_step() { last_ = now_ms(cpu_); }
  void end_step() {
    charge("other", kOutside);
    for (Row& r : rows_) {
      r.ms.push_back(r.step_ms);
      r.step_ms = 0.0;
    }
    ++steps_done_;
  }
  void set_gemm_pass(bool on) { gemm_pass_ = on; }

  void on_event(ProfileEvent e, const char* name) override {
    switch (e) {
      case ProfileEvent::forward_done:
        return charge("forward", name);
      case ProfileEvent::backward_end:
        return charge("backward", name);
      case ProfileEvent::region_end:
        return charge("region", name);
      case ProfileEvent::backward_begin:
      case ProfileEvent::region_begin:
        return charge("other", kOutside);
    }
  }
  void on_gemm(const GemmDesc& d) override { pending_.push_back(d); }

  std::vector<Row>& rows() { return rows_; }

 private:
  Row& row(const char* kind, const char* name) {
    for (Row& r : rows_)
      if (std::strcmp(r.kind, kind) == 0 && std::strcmp(r.name, name) == 0) return r;
    Row& r = rows_.emplace_back();
    r.kind = kind;
    r.name = name;
    r.ms.assign(static_cast<size_t>(steps_done_), 0.0);  // absent from earlier steps
    return r;
  }
  void charge(const char* kind, const char* name) {
    const double now = now_ms(cpu_);
    Row& r = row(kind, name);
    if (gemm_pass_) {
      r.gemms.insert(r.gemms.end(), pending_.begin(), pending_.end());
      pending_.clear();
    } else {
      r.step_ms += now - last_;
      ++r.calls;
    }
    last_ = now_ms(cpu_);  // the observer's own time is charged to no one
  }

  std::vector<Row> rows_;
  std::vector<GemmDesc> pending_;
  double last_ = 0.0;
  bool cpu_;
  int steps_done_ = 0;
  bool gemm_pass_ = false;
};

json row_json(const Row& r, int steps, double total, GemmTimer& timer) {
  const double ms = median(r.ms);
  const GemmOnly g = time_gemms(r.gemms, timer);
  return {{"kind", r.kind},
          {"op", r.name},
          {"calls", static_cast<double>(r.calls) / steps},
          {"ms", ms},
          {"share", total > 0 ? ms / total : 0.0},
          {"gemm_only_ms", g.ms},
          {"gemm_calls", g.calls}};
}

}  // namespace

json profile_steps(const StepSubject& subject, const ProfileOptions& o) {
  for (int i = 0; i < o.warmup; ++i) subject.train_step();
  StepProfiler profiler(o.cpu_clock);
  std::vector<double> step_ms;
  set_op_observer(&profiler);
  for (int i = 0; i < o.steps; ++i) {
    const double t0 = now_ms(o.cpu_clock);
    profiler.begin_step();
    subject.train_step();
    profiler.end_step();
    step_ms.push_back(now_ms(o.cpu_clock) - t0);
  }
  // One more step to see which products each row runs (its times are not kept).
  profiler.set_gemm_pass(true);
  set_gemm_observer(&profiler);
  profiler.begin_step();
  subject.train_step();
  profiler.end_step();
  set_gemm_observer(nullptr);
  set_op_observer(nullptr);

  std::vector<Row>& rows = profiler.rows();
  for (Row& r : rows) r.ms.resize(static_cast<size_t>(o.steps));  // drop the GEMM pass's entry
  std::sort(rows.begin(), rows.end(),
            [](const Row& a, const Row& b) { return median(a.ms) > median(b.ms); });
  double total = 0.0;
  for (const Row& r : rows) total += median(r.ms);
  GemmTimer timer(5, o.cpu_clock);
  json out_rows = json::array();
  double gemm_ms = 0.0;
  for (const Row& r : rows) {
    out_rows.push_back(row_json(r, o.steps, total, timer));
    gemm_ms += out_rows.back()["gemm_only_ms"].get<double>();
  }
  return {{"mode", "profile"},
          {"precision", precision_name(current_precision())},
          {"clock", o.cpu_clock ? "thread cpu" : "wall"},
          {"profile_steps", o.steps},
          {"warmup", o.warmup},
          {"step_ms_median", median(step_ms)},
          {"rows_ms_total", total},
          {"gemm_only_ms", gemm_ms},
          {"rows", out_rows}};
}

}  // namespace headlab::bench
