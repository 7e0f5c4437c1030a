#pragma once
// What the distributed tests share: mpirun as they run it, `headlab train` argument lists, and
// the outcome of a run (checkpoint tensors, metrics without timing, timeline, figures) compared
// bit for bit.

#include <sys/types.h>

#include <filesystem>
#include <string>
#include <vector>

#include "tests/reliability/process.h"

namespace headlab::testing {

// tests/reliability/crash.toml: small and fast.
std::filesystem::path dist_config();

// ASAN_OPTIONS for the ranks under the sanitizers (with `more` appended), or "" without them.
std::string asan_options(const std::string& more = "");

// mpirun as the tests run it: as root if need be, and no single-copy transfers between ranks
// (containers often forbid the ptrace they need); `env` added.
RunOptions mpirun_options(std::vector<std::string> env = {});

// "--oversubscribe --bind-to none -np N".
std::vector<std::string> ranks_of(int n);

// `headlab train` of `config` (dist_config() when empty) into `out`, with `sets` (KEY=VALUE).
std::vector<std::string> train_args(const std::filesystem::path& out,
                                    const std::vector<std::string>& sets, bool resume = false,
                                    const std::filesystem::path& config = {});

RunResult mpirun(int ranks, const std::vector<std::string>& command,
                 RunOptions o = mpirun_options());
// The command (argv[0] the CLI) run as one process.
RunResult alone(const std::vector<std::string>& command);

// The final checkpoint's tensor files, the metrics without timing, the timeline (head masses at
// every evaluation, from the batches rank 0 weighs) and the summary's figures.
struct Outcome {
  std::string model, optimizer, metrics, timeline, figures;
};
Outcome outcome(const std::filesystem::path& run);
// CHECKs every part of `got` against `want`, naming `what`.
void check_same(const Outcome& got, const Outcome& want, const std::string& what);

// Lines of r's stderr that start "headlab: error:".
int count_error_lines(const RunResult& r);
// The pid of rank `rank` among the processes started with HEADLAB_TEST_TAG=tag, or -1.
pid_t find_rank(const std::string& tag, int rank);
size_t lines_in(const std::filesystem::path& file);

}  // namespace headlab::testing
