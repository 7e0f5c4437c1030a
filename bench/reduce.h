#pragma once
// The reduction benchmark of `headlab bench --reduce`, run under mpirun: the time of the
// gradient reduction alone (train/distributed/reduce.h: the chain through the ranks and the broadcast
// back, no training) for gradients of 1 KiB to 64 MiB and of the S, M and L presets' sizes.
// Before each timed repetition the ranks meet (an untimed exchange), so a row measures the
// transfer, not a rank arriving late. Its fit calibrates the cost model of docs/distributed.md.

#include <nlohmann/json.hpp>

namespace headlab {
class Comm;
}

namespace headlab::bench {

// {"mode": "reduce", "ranks", "reps", "rows": [{"bytes", "ms" (median over reps), "ms_min"}],
// "fit": {"latency_us", "bandwidth_gb_per_s"}}: from the fastest repetitions, the time of the
// smallest gradient and the bytes per second of the largest (64 MiB), the two ends of T(bytes)
// ~ latency + bytes / bandwidth. Every rank returns the same report (rank 0's times).
nlohmann::json run_reduce_bench(Comm& comm, int reps);

}  // namespace headlab::bench
