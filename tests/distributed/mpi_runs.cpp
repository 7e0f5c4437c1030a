// What the distributed tests share (tests/distributed/mpi_runs.h).

#include "tests/distributed/mpi_runs.h"

#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tests/reliability/run_dir.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace headlab::testing {

fs::path dist_config() {
  return source_dir() / "tests" / "reliability" / "crash.toml";
}

// ASAN_OPTIONS for the ranks under the sanitizers: the full unwinder, so LeakSanitizer's stacks
// of Open MPI's own allocations reach the libraries scripts/sanitize/lsan.supp names.
std::string asan_options(const std::string& more) {
  const char* asan = std::getenv("ASAN_OPTIONS");
  std::string o = asan ? std::string(asan) : std::string();
  if (!o.empty()) o += ":fast_unwind_on_malloc=0";
  if (!more.empty()) o += (o.empty() ? "" : ":") + more;
  return o;
}

// mpirun as the tests run it: as root if need be, 4 ranks on 2 cores (oversubscribed, unbound),
// and no single-copy transfers between ranks (containers often forbid the ptrace they need).
RunOptions mpirun_options(std::vector<std::string> env) {
  RunOptions o;
  o.program = HEADLAB_MPIEXEC;
  o.timeout_seconds = 300;
  env.insert(env.end(), {"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1",
                         "OMPI_MCA_btl_vader_single_copy_mechanism=none"});
  if (std::getenv("ASAN_OPTIONS")) env.push_back("ASAN_OPTIONS=" + asan_options());
  o.env = env;
  return o;
}

std::vector<std::string> ranks_of(int n) {
  return {"--oversubscribe", "--bind-to", "none", "-np", std::to_string(n)};
}

// `headlab train` of the test config into `out`, with `sets` (KEY=VALUE each).
std::vector<std::string> train_args(const fs::path& out, const std::vector<std::string>& sets,
                                    bool resume, const fs::path& config) {
  std::vector<std::string> a = {
      HEADLAB_CLI,    "train",      (config.empty() ? dist_config() : config).string(),
      "--out",        out.string(), "--no-progress",
      "--no-analysis"};
  if (resume) a.push_back("--resume");
  for (const std::string& s : sets) a.insert(a.end(), {"--set", s});
  return a;
}

RunResult mpirun(int ranks, const std::vector<std::string>& command, RunOptions o) {
  std::vector<std::string> args = ranks_of(ranks);
  args.insert(args.end(), command.begin(), command.end());
  return run_cli(args, o);
}

RunResult alone(const std::vector<std::string>& command) {
  return run_cli(std::vector<std::string>(command.begin() + 1, command.end()));
}

Outcome outcome(const fs::path& run) {
  const fs::path dir = run / "checkpoints" / fs::read_symlink(run / "checkpoints" / "latest");
  const json s = json::parse(read_bytes(run / "summary.json"));
  return {tensors_of(dir / "model.safetensors"), tensors_of(dir / "optimizer.safetensors"),
          metrics_without_timing(run / "metrics.jsonl"), read_bytes(run / "timeline.jsonl"),
          s["eval_loss"].dump() + " " + s["eval_accuracy"].dump() + " " + s["final_loss"].dump() +
              " " + s["global_batch"].dump()};
}

void check_same(const Outcome& got, const Outcome& want, const std::string& what) {
  CHECK_MESSAGE(got.model == want.model, what << ": model.safetensors differs");
  CHECK_MESSAGE(got.optimizer == want.optimizer, what << ": optimizer.safetensors differs");
  CHECK_MESSAGE(got.metrics == want.metrics, what << ": metrics differ:\n"
                                                  << got.metrics << "\nexpected:\n"
                                                  << want.metrics);
  CHECK_MESSAGE(!want.timeline.empty(), what << ": no timeline.jsonl");
  CHECK_MESSAGE(got.timeline == want.timeline, what << ": timeline.jsonl differs");
  CHECK_MESSAGE(got.figures == want.figures,
                what << ": summary " << got.figures << " vs " << want.figures);
}

int count_error_lines(const RunResult& r) {
  int n = 0;
  for (const std::string& line : r.err_lines()) n += line.rfind("headlab: error:", 0) == 0;
  return n;
}

// The pid of rank `rank` among the processes started with HEADLAB_TEST_TAG=tag, or -1.
pid_t find_rank(const std::string& tag, int rank) {
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(e.path() / "environ", std::ios::binary);
    std::string env((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (env.find("HEADLAB_TEST_TAG=" + tag + '\0') != std::string::npos &&
        env.find(fmt::format("OMPI_COMM_WORLD_RANK={}", rank) + '\0') != std::string::npos)
      return static_cast<pid_t>(std::stol(name));
  }
  return -1;
}

size_t lines_in(const fs::path& file) {
  std::ifstream in(file);
  size_t n = 0;
  for (std::string line; std::getline(in, line);) ++n;
  return n;
}

}  // namespace headlab::testing
