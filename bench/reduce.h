#pragma once
// The reduction benchmark of `headlab bench --reduce`, run under mpirun: what the data-parallel
// step's gradient reduction costs, measured the way the step measures it, and the numbers that
// calibrate the cost model of docs/distributed.md (bench/dist_cost_model.py).
//
// Every time below is GradientReducer::finish (train/distributed/reduce.h: the chain through the
// ranks, the division, the broadcast back and the copy out) as the step's own "allreduce time"
// counts it, last_seconds(); add() (the scaling in, which the step does after its backward) is
// not in it. Rank 0's times are reported, as the step reports rank 0's.
//
//   rows         flat gradients of 1 KiB to 64 MiB; before each repetition the ranks meet (an
//                untimed exchange), so a row is the transfer, not a rank arriving late.
//   preset       the preset's real gradient buffers (their sizes and order, the same chunks):
//                isolated_ms as a row; then the preset's training step itself (bench/preset.cpp,
//                the step `bench --preset` times) run `steps` times: in_step_ms, the step's own
//                reduction time; in_step_wait_ms, how much later than rank 0 the last rank
//                began its reduction (the ranks of one host share the steady clock); and
//                in_step_transfer_ms, the first less the second, per step.
//   calibration  the model's inputs measured here: alpha_us (half a round trip of 8 bytes
//                between ranks 0 and 1); beta_up_gb_per_s, one message of the chain's chunk
//                size for the preset at this rank count from rank r to r + 1, timed by the
//                sender as the chain's sends are, the mean time over the hops; beta_down_gb_per_s,
//                the same message from the last rank into rank 0, timed by rank 0 (its part of
//                the broadcast is that receive); beta_gb_per_s, the mean time of the two;
//                gamma_add_ and
//                gamma_copy_gb_per_s (the chain's add and the copy-out, every rank at once, as
//                in the step), and bcast_ms (comm.broadcast of the preset's gradient from the
//                last rank, the reduction's own broadcast).

#include <string>

#include <nlohmann/json.hpp>

namespace headlab {
class Comm;
}

namespace headlab::bench {

struct ReduceBenchOptions {
  std::string preset = "L";  // S, M or L
  int reps = 15;             // timed repetitions per row and per calibration figure
  int steps = 0;             // timed training steps (0: the preset's default)
  int warmup = 0;            // warm-up steps (0: the preset's default)
};

// {"mode": "reduce", "ranks", "reps", "rows": [{"bytes", "ms" (median), "ms_min"}],
//  "preset": {...}, "calibration": {...}} as above. Every rank returns the same report.
nlohmann::json run_reduce_bench(Comm& comm, const ReduceBenchOptions& options);

}  // namespace headlab::bench
