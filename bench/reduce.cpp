// `headlab bench --reduce` (see bench/reduce.h).

#include "bench/reduce.h"

#include <algorithm>
#include <chrono>
#include <span>
#include <vector>

#include "train/distributed/agree.h"
#include "train/distributed/comm.h"
#include "train/distributed/reduce.h"

namespace headlab::bench {
namespace {

using nlohmann::json;

// Seconds of one reduction of `floats` gradient values over every rank, per repetition, sorted.
std::vector<double> time_reduction(Comm& comm, int64_t floats, int reps) {
  std::vector<float> grad(static_cast<size_t>(floats), 1.0f);
  const std::span<float> buffers[] = {std::span<float>(grad)};
  GradientReducer reduce(comm, 1, {floats});
  std::vector<double> seconds;
  for (int r = 0; r < reps + 1; ++r) {  // the first is a warm-up
    any_rank(comm, false);              // the ranks meet: nobody is timed waiting for a late one
    const auto start = std::chrono::steady_clock::now();
    reduce.add(buffers, 1);
    reduce.finish(buffers, comm.size());
    if (r > 0)
      seconds.push_back(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(seconds.begin(), seconds.end());
  return seconds;
}

}  // namespace

json run_reduce_bench(Comm& comm, int reps) {
  // 1 KiB .. 64 MiB in powers of 4, then the presets' parameter counts (S, M, L).
  std::vector<int64_t> sizes;
  for (int64_t floats = 256; floats <= (int64_t{1} << 24); floats *= 4) sizes.push_back(floats);
  for (int64_t preset : {105'120, 408'864, 3'191'840}) sizes.push_back(preset);
  json rows = json::array();
  for (int64_t floats : sizes) {
    const std::vector<double> s = time_reduction(comm, floats, reps);
    double ms[2] = {1e3 * s[s.size() / 2], 1e3 * s.front()};
    comm.broadcast(0, std::as_writable_bytes(std::span(ms)));  // rank 0's figures everywhere
    rows.push_back({{"bytes", 4 * floats}, {"ms", ms[0]}, {"ms_min", ms[1]}});
  }
  // From the fastest repetitions (other work on the machine only adds time): the latency of the
  // smallest gradient, and the bandwidth of the largest (the chain, the broadcast and the
  // passes over memory together: bytes / time).
  const double latency_ms = rows[0]["ms_min"].get<double>();
  const json& largest = rows[sizes.size() - 4];
  const double per_byte_ms = largest["ms_min"].get<double>() / largest["bytes"].get<double>();
  return {{"mode", "reduce"},
          {"ranks", comm.size()},
          {"reps", reps},
          {"rows", rows},
          {"fit",
           {{"latency_us", 1e3 * latency_ms},
            {"bandwidth_gb_per_s", per_byte_ms > 0 ? 1e-6 / per_byte_ms : 0.0}}}};
}

}  // namespace headlab::bench
