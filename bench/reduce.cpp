// `headlab bench --reduce` (see bench/reduce.h).

#include "bench/reduce.h"

#include <algorithm>
#include <chrono>
#include <numeric>
#include <span>
#include <vector>

#include "bench/step.h"
#include "train/distributed/agree.h"
#include "train/distributed/comm.h"
#include "train/distributed/reduce.h"

namespace headlab::bench {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// Rank 0's value on every rank (the report is rank 0's, and every rank returns it).
double rank0(Comm& comm, double v) {
  comm.broadcast(0, std::as_writable_bytes(std::span(&v, 1)));
  return v;
}

// Seconds of GradientReducer::finish over buffers of these sizes, per repetition (the step's
// own measure, last_seconds), the ranks meeting after add() so that none is timed waiting for a
// late one.
std::vector<double> time_finish(Comm& comm, const std::vector<int64_t>& sizes, int reps) {
  std::vector<std::vector<float>> buffers;
  std::vector<std::span<float>> grads;
  for (int64_t n : sizes) buffers.emplace_back(static_cast<size_t>(n), 1.0f);
  for (std::vector<float>& b : buffers) grads.emplace_back(b);
  GradientReducer reduce(comm, 1, sizes);
  std::vector<double> seconds;
  for (int r = 0; r < reps + 1; ++r) {  // the first is a warm-up
    reduce.add(grads, 1);               // the values stay 1: N ones summed, divided by N
    any_rank(comm, false);
    reduce.finish(grads, comm.size());
    if (r > 0) seconds.push_back(reduce.last_seconds());
  }
  return seconds;
}

// Median seconds of `f` over reps (after one warm-up) as rank `who` timed it, every rank meeting
// before each.
template <class F>
double timed(Comm& comm, int reps, F f, int who = 0) {
  std::vector<double> s;
  for (int r = 0; r < reps + 1; ++r) {
    any_rank(comm, false);
    const Clock::time_point start = Clock::now();
    f();
    if (r > 0) s.push_back(seconds_since(start));
  }
  double v = median(s);
  comm.broadcast(who, std::as_writable_bytes(std::span(&v, 1)));
  return v;
}

json calibration(Comm& comm, int64_t floats, int64_t chunk, int reps) {
  const int r = comm.rank();
  std::vector<float> ping(2), message(static_cast<size_t>(chunk), 1.0f);
  constexpr int kTrips = 100;
  const double trips = timed(comm, reps, [&] {
    for (int t = 0; t < kTrips; ++t) {
      if (r == 0) comm.send(1, bytes_of(std::span<const float>(ping)));
      if (r == 0) comm.recv(1, bytes_of(std::span(ping)));
      if (r == 1) comm.recv(0, bytes_of(std::span(ping)));
      if (r == 1) comm.send(0, bytes_of(std::span<const float>(ping)));
    }
  });
  // The chain's hops, each timed by its sender as the chain's sends are (a send ends when the
  // next rank has taken the message; on a shared machine a sender that yielded its core waits to
  // get it back), their mean; and the broadcast's hop into rank 0 (to 4 ranks Open MPI's
  // broadcast sends each rank the whole gradient from the root, the last rank), timed by rank 0,
  // the receiver. On a network the two are one bandwidth; on a busy shared machine they need not
  // be.
  const int n = comm.size();
  double up = 0;
  for (int from = 0; from + 1 < n; ++from)
    up += timed(
              comm, reps,
              [&] {
                if (r == from) comm.send(from + 1, bytes_of(std::span<const float>(message)));
                if (r == from + 1) comm.recv(from, bytes_of(std::span(message)));
              },
              from) /
          (n - 1);
  const double down = timed(comm, reps, [&] {
    if (r == n - 1) comm.send(0, bytes_of(std::span<const float>(message)));
    if (r == 0) comm.recv(n - 1, bytes_of(std::span(message)));
  });
  const double p2p = (up + down) / 2;
  std::vector<float> a(static_cast<size_t>(floats), 1.0f), b(a.size(), 0.0f);
  const double add = timed(comm, reps, [&] {
    for (size_t i = 0; i < a.size(); ++i) b[i] = b[i] + a[i];
  });
  const double copy = timed(comm, reps, [&] { std::copy(a.begin(), a.end(), b.begin()); });
  const double bcast =
      timed(comm, reps, [&] { comm.broadcast(comm.size() - 1, bytes_of(std::span(b))); });
  const double bytes = 4.0 * static_cast<double>(floats), chunk_bytes = 4.0 * chunk;
  return {{"alpha_us", 1e6 * trips / (2 * kTrips)},
          {"beta_gb_per_s", chunk_bytes / p2p * 1e-9},
          {"beta_message_bytes", chunk_bytes},
          {"beta_up_gb_per_s", chunk_bytes / up * 1e-9},
          {"beta_down_gb_per_s", chunk_bytes / down * 1e-9},
          {"gamma_add_gb_per_s", bytes / add * 1e-9},
          {"gamma_copy_gb_per_s", bytes / copy * 1e-9},
          {"bcast_ms", 1e3 * bcast},
          {"bcast_bytes", bytes}};
}

// The preset's own training step (bench/preset.cpp), its reduction timed by the step itself.
json in_step(Comm& comm, const ReduceBenchOptions& o) {
  StepBenchOptions so;
  so.preset = o.preset;
  so.steps = o.steps;
  so.warmup = o.warmup;
  so.comm = &comm;
  Workload w = preset_workload(so, 1);
  const int steps = o.steps > 0 ? o.steps : w.steps, warmup = o.warmup > 0 ? o.warmup : w.warmup;
  for (int i = 0; i < warmup; ++i) w.subject.train_step();
  std::vector<double> total, wait, transfer;
  std::vector<double> began(static_cast<size_t>(comm.size()));
  for (int i = 0; i < steps; ++i) {
    w.subject.train_step();
    const double mine = w.subject.reduce_began();  // outside the timed reduction
    comm.allgather(std::as_bytes(std::span(&mine, 1)), std::as_writable_bytes(std::span(began)));
    const double late = std::max(0.0, *std::max_element(began.begin(), began.end()) - began[0]);
    total.push_back(w.subject.reduce_seconds());
    wait.push_back(late);
    transfer.push_back(std::max(0.0, total.back() - late));
  }
  return {{"steps", steps},
          {"in_step_ms", 1e3 * rank0(comm, median(total))},
          {"in_step_wait_ms", 1e3 * rank0(comm, median(wait))},
          {"in_step_transfer_ms", 1e3 * rank0(comm, median(transfer))}};
}

}  // namespace

json run_reduce_bench(Comm& comm, const ReduceBenchOptions& o) {
  if (comm.size() < 2) fail("--reduce needs at least 2 ranks (run it under mpirun -np N)");
  json rows = json::array();
  for (int64_t floats = 256; floats <= (int64_t{1} << 24); floats *= 4) {
    const std::vector<double> s = time_finish(comm, {floats}, o.reps);
    rows.push_back({{"bytes", 4 * floats},
                    {"ms", 1e3 * rank0(comm, median(s))},
                    {"ms_min", 1e3 * rank0(comm, *std::min_element(s.begin(), s.end()))}});
  }
  const std::vector<int64_t> sizes = preset_gradient_sizes(o.preset);
  const int64_t floats = std::accumulate(sizes.begin(), sizes.end(), int64_t{0});
  // The chain's chunk, as GradientReducer cuts it.
  const int64_t chunk = std::clamp((floats + comm.size() - 1) / comm.size(),
                                   GradientReducer::kMinChunk, GradientReducer::kMaxChunk);
  json preset = {{"preset", o.preset},
                 {"bytes", 4 * floats},
                 {"buffers", sizes.size()},
                 {"chunk_bytes", 4 * chunk},
                 {"isolated_ms", 1e3 * rank0(comm, median(time_finish(comm, sizes, o.reps)))}};
  json cal = calibration(comm, floats, chunk, o.reps);
  preset.update(in_step(comm, o));
  return {{"mode", "reduce"}, {"ranks", comm.size()}, {"reps", o.reps},
          {"rows", rows},     {"preset", preset},     {"calibration", cal}};
}

}  // namespace headlab::bench
