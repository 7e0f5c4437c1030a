// The optimizer state sharded over the ranks (runtime.shard_optimizer, ZeRO-1,
// train/run/optimizer_shard.h) under mpirun: the same bits as one process (checkpoint tensors,
// metrics, timeline, figures) at 2 and 3 ranks, each rank holding its shard alone (summary.json's
// optimizer_state, from each rank's optimizer), and resumes across sharded and unsharded runs and
// across rank counts. One global batch of 6 micro-batches throughout: one process x 6, 2 ranks x
// 3, 3 ranks x 2.

#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tests/distributed/mpi_runs.h"
#include "tests/reliability/process.h"
#include "tests/reliability/run_dir.h"

using namespace headlab::testing;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// A constant rate, so that a run extended on --resume computes what a straight one does.
const std::vector<std::string> kCommon = {"train.batch_size=4",       "train.eval_every=4",
                                          "train.timeline_batches=1", "train.log_every=1",
                                          "train.checkpoint_every=4", "schedule.name=constant",
                                          "runtime.dist_timeout=60"};

std::vector<std::string> sets_of(int64_t steps, int accum, bool shard) {
  std::vector<std::string> s = kCommon;
  s.push_back(fmt::format("train.steps={}", steps));
  s.push_back(fmt::format("train.grad_accum={}", accum));
  s.push_back(fmt::format("runtime.shard_optimizer={}", shard ? "true" : "false"));
  return s;
}

// `ranks` ranks (one process alone when 1) of 6 / ranks micro-batches each.
RunResult train_run(int ranks, const fs::path& out, int64_t steps, bool shard,
                    bool resume = false) {
  const std::vector<std::string> args = train_args(out, sets_of(steps, 6 / ranks, shard), resume);
  return ranks == 1 ? alone(args) : mpirun(ranks, args);
}

json optimizer_state(const fs::path& run) {
  return json::parse(read_bytes(run / "summary.json"))["optimizer_state"];
}

}  // namespace

TEST_CASE("dist: shard: sharded 2 and 3 ranks equal one process bit for bit, a shard per rank") {
  TempDir tmp("dist-shard");
  const fs::path one = tmp / "one";
  const RunResult ref = train_run(1, one, 8, false);
  REQUIRE_MESSAGE(ref.exit_code == 0, ref.describe());
  const Outcome want = outcome(one);
  const json whole = optimizer_state(one);
  CHECK(whole["sharded"] == false);
  const int64_t bytes = whole["bytes_unsharded"].get<int64_t>();
  CHECK(bytes > 0);
  CHECK(whole["bytes_per_rank"] == json::array({bytes}));

  for (int ranks : {2, 3}) {
    const std::string what = fmt::format("{} ranks sharded vs one process", ranks);
    CAPTURE(what);
    const fs::path run = tmp / fmt::format("np{}", ranks);
    const RunResult r = train_run(ranks, run, 8, true);
    REQUIRE_MESSAGE(r.exit_code == 0, r.describe());
    check_same(outcome(run), want, what);
    // Each rank's optimizer holds its own parameters' state alone: together the whole, once.
    const json state = optimizer_state(run);
    CHECK(state["sharded"] == true);
    CHECK(state["bytes_unsharded"] == bytes);
    REQUIRE(state["bytes_per_rank"].size() == static_cast<size_t>(ranks));
    int64_t sum = 0;
    for (const json& b : state["bytes_per_rank"]) {
      CHECK(b.get<int64_t>() > 0);
      CHECK(b.get<int64_t>() < bytes);
      sum += b.get<int64_t>();
    }
    CHECK(sum == bytes);
  }
}

TEST_CASE("dist: shard: resume across sharded and unsharded runs and across rank counts") {
  TempDir tmp("dist-shard-resume");
  const fs::path one = tmp / "one";
  const RunResult ref = train_run(1, one, 8, false);
  REQUIRE_MESSAGE(ref.exit_code == 0, ref.describe());
  const Outcome want = outcome(one);

  // First half sharded on 2 ranks: its checkpoint is the one-process file, so 3 ranks resume it
  // unsharded and sharded alike.
  const fs::path sharded = tmp / "sharded";
  const RunResult a = train_run(2, sharded, 4, true);
  REQUIRE_MESSAGE(a.exit_code == 0, a.describe());
  copy_tree(sharded, tmp / "sharded-copy");
  struct Resume {
    fs::path run;
    int ranks;
    bool shard;
    const char* what;
  };
  const fs::path half = tmp / "unsharded";
  const RunResult b = train_run(3, half, 4, false);
  REQUIRE_MESSAGE(b.exit_code == 0, b.describe());
  for (const Resume& r :
       {Resume{sharded, 3, false, "2 ranks sharded resumed by 3 unsharded"},
        Resume{tmp / "sharded-copy", 3, true, "2 ranks sharded resumed by 3 sharded"},
        Resume{half, 2, true, "3 ranks unsharded resumed by 2 sharded"}}) {
    CAPTURE(r.what);
    const RunResult c = train_run(r.ranks, r.run, 8, r.shard, true);
    REQUIRE_MESSAGE(c.exit_code == 0, c.describe());
    check_same(outcome(r.run), want, r.what);
    CHECK(optimizer_state(r.run)["sharded"] == r.shard);
  }
}

TEST_CASE("dist: shard: runtime.shard_optimizer takes true or false") {
  TempDir tmp("dist-shard-key");
  std::vector<std::string> sets = sets_of(2, 1, false);
  sets.back() = "runtime.shard_optimizer=half";
  const RunResult r = alone(train_args(tmp / "run", sets));
  CHECK(r.exit_code == 2);
  CHECK_MESSAGE(count_error_lines(r) == 1, r.describe());
  CHECK_MESSAGE(r.err.find("runtime.shard_optimizer") != std::string::npos, r.describe());
}

TEST_CASE(
    "dist: shard: bench --preset --shard-optimizer ends at the unsharded loss, a shard per rank") {
  // The benchmark's step (bench/dist_scaling.py's ZeRO-1 row) must be the step it names: the
  // same bits as unsharded, and each rank holding about half of Adam's state at 2 ranks.
  const auto bench = [](bool shard) {
    std::vector<std::string> a = {HEADLAB_CLI, "bench", "--preset", "S", "--threads", "1",
                                  "--steps",   "4",     "--warmup", "1", "--json"};
    if (shard) a.push_back("--shard-optimizer");
    const RunResult r = mpirun(2, a);
    REQUIRE_MESSAGE(r.exit_code == 0, r.describe());
    std::string out = r.out;  // the report is the last line
    while (!out.empty() && out.back() == '\n') out.pop_back();
    return json::parse(out.substr(out.rfind('\n') + 1));
  };
  const json plain = bench(false), sharded = bench(true);
  CHECK(plain["shard_optimizer"] == false);
  CHECK(sharded["shard_optimizer"] == true);
  CHECK(sharded["loss_last"].get<double>() == plain["loss_last"].get<double>());
  const int64_t whole = plain["optimizer_state_bytes_per_rank"].get<int64_t>();
  const int64_t mine = sharded["optimizer_state_bytes_per_rank"].get<int64_t>();
  CHECK(mine > 0);
  CHECK(mine < whole);
  CHECK(mine * 10 >= whole * 4);  // greedy whole tensors: within 40-60% of the state
}
