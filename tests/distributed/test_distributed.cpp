// Data-parallel training and sweeps under mpirun on this host (docs/distributed.md): N ranks x
// grad_accum A give the weights, optimizer state and metrics of one process x N A bit for bit;
// a run resumes under mpirun, and with another split of its global batch, bit-identically; a
// killed, failing or hung rank ends the job quickly with one line naming it; ranks that disagree
// are refused at start-up; a sweep over ranks equals the one-process sweep. Small configs, few
// steps: every case runs in seconds.

#include <doctest/doctest.h>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/kernels/kernels.h"
#include "tests/distributed/mpi_runs.h"
#include "tests/reliability/process.h"
#include "tests/reliability/run_dir.h"

using namespace headlab::testing;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Starts a long run of `ranks` ranks, waits until it has trained a few steps, sends
// `signal_number` to rank `rank`, does `then` (with the tag that find_rank takes) while the job
// runs on, and returns the run with the seconds from the signal to mpirun's end.
RunResult act_on_rank_during_training(const fs::path& out, int ranks, int rank, int signal_number,
                                      const std::vector<std::string>& sets, double& seconds_after,
                                      const std::function<void(const std::string&)>& then = {}) {
  const std::string tag = fmt::format("{}-{}", ::getpid(), out.filename().string());
  RunResult r;
  std::thread job([&] {
    r = mpirun(ranks, train_args(out, sets), mpirun_options({"HEADLAB_TEST_TAG=" + tag}));
  });
  pid_t pid = -1;
  const auto start = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - start < std::chrono::seconds(120)) {
    if ((pid = find_rank(tag, rank)) > 0 && lines_in(out / "metrics.jsonl") >= 3) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const auto acted = std::chrono::steady_clock::now();
  if (pid > 0) ::kill(pid, signal_number);
  if (pid > 0 && then) then(tag);
  job.join();
  seconds_after = std::chrono::duration<double>(std::chrono::steady_clock::now() - acted).count();
  REQUIRE_MESSAGE(pid > 0, "rank " << rank << " never showed up: " << r.describe());
  return r;
}

// CPU seconds (user and system, every thread) process `pid` has used, or -1 once it is gone.
double cpu_seconds(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t paren = stat.rfind(')');  // the command name may hold spaces
  if (paren == std::string::npos) return -1;
  std::istringstream fields(stat.substr(paren + 2));
  std::string field;
  unsigned long long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i) {  // fields 14 and 15: utime, stime
    if (i == 14) utime = std::stoull(field);
    if (i == 15) stime = std::stoull(field);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

}  // namespace

TEST_CASE("dist: N ranks x grad_accum A equal one process x N*A bit for bit (N = 2, 4)") {
  TempDir tmp("dist-identity");
  // 5 evaluation batches, of which the timeline weighs 2 (on rank 0): the rest are split.
  const std::vector<std::string> common = {"train.steps=12",           "train.batch_size=8",
                                           "train.eval_every=6",       "train.eval_batches=5",
                                           "train.timeline_batches=2", "schedule.warmup_steps=3"};
  struct Split {
    int ranks, accum;
  };
  for (int m : {2, 4}) {
    std::vector<std::string> sets = common;
    sets.push_back(fmt::format("train.grad_accum={}", m));
    const fs::path one = tmp / fmt::format("one-x{}", m);
    const RunResult ref = alone(train_args(one, sets));
    REQUIRE_MESSAGE(ref.exit_code == 0, ref.describe());
    const Outcome want = outcome(one);
    const std::vector<Split> splits =
        m == 2 ? std::vector<Split>{{2, 1}} : std::vector<Split>{{4, 1}, {2, 2}};
    for (const Split& s : splits) {
      const std::string what =
          fmt::format("{} ranks x {} vs one process x {}", s.ranks, s.accum, m);
      CAPTURE(what);
      std::vector<std::string> split_sets = common;
      split_sets.push_back(fmt::format("train.grad_accum={}", s.accum));
      const fs::path run = tmp / fmt::format("np{}-x{}", s.ranks, s.accum);
      const RunResult r = mpirun(s.ranks, train_args(run, split_sets));
      REQUIRE_MESSAGE(r.exit_code == 0, r.describe());
      check_same(outcome(run), want, what);
      CHECK(json::parse(read_bytes(run / "summary.json"))["ranks"] == s.ranks);
    }
  }
}

TEST_CASE("dist: 2 ranks in bf16 equal one process x 2 in bf16 bit for bit, and differ from fp32") {
  if (!headlab::bf16_supported()) {
    MESSAGE("skipped: this CPU has no AVX512_BF16");
    return;
  }
  TempDir tmp("dist-bf16");
  // Each rank's micro-batch has the shape of one of the single process's two, so every bf16
  // product has the same shape and thread count (1) and oneDNN sums in the same order.
  const std::vector<std::string> common = {"train.steps=8", "train.batch_size=8",
                                           "train.eval_every=4", "train.eval_batches=3",
                                           "schedule.warmup_steps=2"};
  auto with = [&](std::vector<std::string> more) {
    more.insert(more.begin(), common.begin(), common.end());
    return more;
  };
  const RunResult ref =
      alone(train_args(tmp / "one", with({"train.grad_accum=2", "runtime.precision=\"bf16\""})));
  REQUIRE_MESSAGE(ref.exit_code == 0, ref.describe());
  const RunResult r = mpirun(
      2, train_args(tmp / "np2", with({"train.grad_accum=1", "runtime.precision=\"bf16\""})));
  REQUIRE_MESSAGE(r.exit_code == 0, r.describe());
  const Outcome want = outcome(tmp / "one");
  check_same(outcome(tmp / "np2"), want, "2 ranks x 1 vs one process x 2, bf16");
  // the products really ran in bf16: the same run in fp32 ends with other weights
  const RunResult fp32 = alone(train_args(tmp / "fp32", with({"train.grad_accum=2"})));
  REQUIRE_MESSAGE(fp32.exit_code == 0, fp32.describe());
  CHECK(outcome(tmp / "fp32").model != want.model);
}

TEST_CASE("dist: resume under mpirun after rank 0 died in a checkpoint, and with another split") {
  TempDir tmp("dist-resume");
  const std::vector<std::string> sets = {"train.steps=20", "train.checkpoint_every=5",
                                         "train.eval_every=10", "schedule.warmup_steps=3"};
  const fs::path straight = tmp / "straight";
  const RunResult s = mpirun(2, train_args(straight, sets));
  REQUIRE_MESSAGE(s.exit_code == 0, s.describe());
  const Outcome want = outcome(straight);

  // Rank 0 is killed (SIGKILL) at its 9th rename, inside the second checkpoint's write (as
  // train.steps=20 counts them: the run directory's files take the first ones): the job ends,
  // the last complete checkpoint stays `latest`.
  const fs::path run = tmp / "crashed";
  std::vector<std::string> crash = ranks_of(1);
  crash.insert(crash.end(), {"-x", std::string("LD_PRELOAD=") + HEADLAB_KILL_SHIM, "-x",
                             "HEADLAB_KILL_AT=rename:9", "-x",
                             "ASAN_OPTIONS=" + asan_options("verify_asan_link_order=0")});
  for (const std::string& a : train_args(run, sets)) crash.push_back(a);
  crash.push_back(":");
  crash.insert(crash.end(), {"-np", "1"});
  for (const std::string& a : train_args(run, sets)) crash.push_back(a);
  const RunResult c = run_cli(crash, mpirun_options());
  REQUIRE_MESSAGE(c.exit_code != 0, c.describe());
  CHECK_MESSAGE(c.err.find("rank 0") != std::string::npos, c.describe());
  const std::string latest = fs::read_symlink(run / "checkpoints" / "latest").string();
  CHECK_MESSAGE(latest < "step-000020", latest);
  copy_tree(run, tmp / "crashed-copy");

  const RunResult r = mpirun(2, train_args(run, sets, true));
  REQUIRE_MESSAGE(r.exit_code == 0, r.describe());
  check_same(outcome(run), want, "2 ranks resumed by 2 ranks");

  // The same global batch of 32 as one process x 2 micro-batches: the same computation.
  std::vector<std::string> accum = sets;
  accum.push_back("train.grad_accum=2");
  const RunResult a = alone(train_args(tmp / "crashed-copy", accum, true));
  REQUIRE_MESSAGE(a.exit_code == 0, a.describe());
  check_same(outcome(tmp / "crashed-copy"), want, "2 ranks resumed by one process x 2");

  // Another global batch is another run: refused, once, naming both.
  const RunResult refused = mpirun(2, train_args(run, accum, true));
  CHECK(refused.exit_code == 2);
  CHECK_MESSAGE(count_error_lines(refused) == 1, refused.describe());
  CHECK_MESSAGE(
      refused.err.find("the global batch: 32 (checkpoint) vs 64 (config) (train.grad_accum: 1 "
                       "(checkpoint) vs 2 (config))") != std::string::npos,
      refused.describe());
}

TEST_CASE("dist: a killed, failing or hung rank ends the job quickly with one line naming it") {
  TempDir tmp("dist-failure");
  const std::vector<std::string> endless = {"train.steps=1000000", "schedule.warmup_steps=3",
                                            "train.eval_every=0", "train.checkpoint_every=0"};
  double after = 0;
  const RunResult killed =
      act_on_rank_during_training(tmp / "killed", 2, 1, SIGKILL, endless, after);
  CHECK_MESSAGE(killed.exit_code != 0, killed.describe());
  CHECK_MESSAGE(after < 30, after << " s after the kill\n" << killed.describe());
  CHECK_MESSAGE(killed.err.find("rank 1") != std::string::npos, killed.describe());
  CHECK_MESSAGE(killed.err.find("signal 9") != std::string::npos, killed.describe());
  // mpirun's SIGTERM to rank 0 makes it ask who is still there (Comm::presence): its one line
  // names the rank that died and its host.
  char host[256] = {};
  REQUIRE(::gethostname(host, sizeof host - 1) == 0);
  CHECK_MESSAGE(count_error_lines(killed) == 1, killed.describe());
  CHECK_MESSAGE(killed.err.find(fmt::format("headlab: error: train: rank 1 on {} ended during the "
                                            "run (killed, crashed, or its host went down); rank 0 "
                                            "on {} is still there",
                                            host, host)) != std::string::npos,
                killed.describe());

  std::vector<std::string> hang = endless;
  hang.push_back("runtime.dist_timeout=2");
  const RunResult hung = act_on_rank_during_training(tmp / "hung", 2, 1, SIGSTOP, hang, after);
  CHECK(hung.exit_code == 2);
  CHECK_MESSAGE(after < 30, after << " s after the stop\n" << hung.describe());
  CHECK_MESSAGE(count_error_lines(hung) == 1, hung.describe());
  CHECK_MESSAGE(hung.err.find("headlab: error: train: rank 1 did not arrive in 2 s "
                              "(runtime.dist_timeout): rank 0 waited for it; it hung, was stopped "
                              "or is far behind") != std::string::npos,
                hung.describe());

  // Rank 0's disk fails in a checkpoint (its 6th rename: the first checkpoint's directory, after
  // the run directory's own files): its error, named, ends rank 1 too.
  const fs::path failed = tmp / "failed";
  std::vector<std::string> args = ranks_of(1);
  args.insert(args.end(), {"-x", std::string("LD_PRELOAD=") + HEADLAB_KILL_SHIM, "-x",
                           "HEADLAB_KILL_AT=rename:6:fail", "-x",
                           "ASAN_OPTIONS=" + asan_options("verify_asan_link_order=0")});
  const std::vector<std::string> every = {"train.steps=1000000", "train.checkpoint_every=2"};
  for (const std::string& a : train_args(failed, every)) args.push_back(a);
  args.insert(args.end(), {":", "-np", "1"});
  for (const std::string& a : train_args(failed, every)) args.push_back(a);
  const RunResult f = run_cli(args, mpirun_options());
  CHECK(f.exit_code == 2);
  CHECK_MESSAGE(count_error_lines(f) == 1, f.describe());
  CHECK_MESSAGE(f.err.find("headlab: error: train: rank 0: cannot rename") != std::string::npos,
                f.describe());
  CHECK(f.seconds < 60);
}

// A SIGTERM to every rank (a scheduler's, or a user's) while all are there is a graceful stop:
// each rank's presence call finds every rank answering, so nothing names a rank that died, and
// the ranks stop after the same step with a checkpoint and the continue command.
TEST_CASE("dist: SIGTERM to every rank stops gracefully, naming no rank as gone") {
  TempDir tmp("dist-sigterm");
  const std::vector<std::string> endless = {"train.steps=1000000", "schedule.warmup_steps=3",
                                            "train.eval_every=0", "train.checkpoint_every=0"};
  double after = 0;
  const RunResult r = act_on_rank_during_training(
      tmp / "run", 2, 1, SIGTERM, endless, after, [](const std::string& tag) {
        if (const pid_t rank0 = find_rank(tag, 0); rank0 > 0) ::kill(rank0, SIGTERM);
      });
  CHECK_MESSAGE(r.exit_code == 128 + SIGTERM, r.describe());
  CHECK_MESSAGE(count_error_lines(r) == 0, r.describe());
  CHECK_MESSAGE(r.err.find("ended during the run") == std::string::npos, r.describe());
  CHECK_MESSAGE(r.err.find("headlab: interrupted by SIGTERM at step") != std::string::npos,
                r.describe());
}

// Rank 2 of 4 stops (SIGSTOP) in mid-run: the others wait for it, each for something else (rank
// 3 for rank 2's message, rank 1 for rank 2 to take its own or for rank 3's broadcast, rank 0
// for rank 3's broadcast), napping: each uses under 5% of a core over seconds of the wait (CPU
// time it consumed, asserted; a busy machine only lowers it). When the wait runs out, one line
// names rank 2, from rank 0 alone.
TEST_CASE("dist: ranks waiting for a stopped rank sleep, and one line names the stopped rank") {
  TempDir tmp("dist-wait");
  const std::vector<std::string> sets = {"train.steps=1000000", "schedule.warmup_steps=3",
                                         "train.eval_every=0", "train.checkpoint_every=0",
                                         "runtime.dist_timeout=6"};
  std::vector<double> used;
  double window = 0, after = 0;
  const RunResult r = act_on_rank_during_training(
      tmp / "run", 4, 2, SIGSTOP, sets, after, [&](const std::string& tag) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1000));  // all reach their waits
        std::vector<pid_t> waiting;
        std::vector<double> before;
        for (int rank : {0, 1, 3}) {
          waiting.push_back(find_rank(tag, rank));
          before.push_back(cpu_seconds(waiting.back()));
        }
        const auto start = std::chrono::steady_clock::now();
        std::this_thread::sleep_for(std::chrono::milliseconds(3000));
        for (size_t i = 0; i < waiting.size(); ++i)
          used.push_back(cpu_seconds(waiting[i]) - before[i]);
        window = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      });
  REQUIRE(used.size() == 3);
  for (size_t i = 0; i < used.size(); ++i) {
    CAPTURE(i);
    CHECK_MESSAGE(used[i] >= 0, "a waiting rank ended during the measurement\n" << r.describe());
    CHECK_MESSAGE(used[i] < 0.05 * window, used[i] << " s of CPU in " << window << " s of waiting\n"
                                                   << r.describe());
  }
  CHECK(r.exit_code == 2);
  CHECK_MESSAGE(count_error_lines(r) == 1, r.describe());
  CHECK_MESSAGE(
      r.err.find("headlab: error: train: rank 2 did not arrive in 6 s "
                 "(runtime.dist_timeout): ranks 0, 1 and 3 waited for it") != std::string::npos,
      r.describe());
  CHECK_MESSAGE(after < 60, after << " s after the stop\n" << r.describe());
}

TEST_CASE("dist: ranks with different configs are refused at start-up, once") {
  TempDir tmp("dist-mismatch");
  std::vector<std::string> args = ranks_of(1);
  for (const std::string& a : train_args(tmp / "run", {})) args.push_back(a);
  args.insert(args.end(), {":", "-np", "1"});
  for (const std::string& a : train_args(tmp / "run", {"model.heads=8"})) args.push_back(a);
  const RunResult r = run_cli(args, mpirun_options());
  CHECK(r.exit_code == 2);
  CHECK_MESSAGE(count_error_lines(r) == 1, r.describe());
  CHECK_MESSAGE(r.err.find("rank 1 differs from rank 0 in the resolved config: 'heads = 8' here, "
                           "'heads = 4' on rank 0") != std::string::npos,
                r.describe());
  CHECK_FALSE(fs::exists(tmp / "run" / "metrics.jsonl"));
}

// A rank that runs another command, the same command with other choices, or the same config
// with a setting that changes its kernels (OPENBLAS_CORETYPE) is named at start-up in one line,
// quickly (not after runtime.dist_timeout), and nothing is written.
TEST_CASE("dist: a rank running another command or with other numeric settings is refused") {
  TempDir tmp("dist-other-command");
  const fs::path run = tmp / "run";
  struct Case {
    std::string name;
    std::vector<std::string> second;  // rank 1's command line (after -np 1)
    std::string fragment;
  };
  std::vector<std::string> resume = train_args(run, {}, true);
  std::vector<std::string> coretype = {"env", "OPENBLAS_CORETYPE=Prescott"};
  for (const std::string& a : train_args(run, {})) coretype.push_back(a);
  const std::vector<Case> cases = {
      {"info beside train",
       {HEADLAB_CLI, "info"},
       "rank 1 differs from rank 0 in the command it runs: 'headlab info' here, 'headlab train' "
       "on rank 0"},
      {"--resume beside a fresh run", resume,
       "rank 1 differs from rank 0 in the train command's choices"},
      {"another OPENBLAS_CORETYPE", coretype,
       "rank 1 differs from rank 0 in the settings that can change results: "},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = ranks_of(1);
    for (const std::string& a : train_args(run, {"runtime.dist_timeout=120"})) args.push_back(a);
    args.insert(args.end(), {":", "-np", "1"});
    args.insert(args.end(), c.second.begin(), c.second.end());
    const RunResult r = run_cli(args, mpirun_options());
    INFO(c.name << ": " << r.describe());
    CHECK(r.exit_code == 2);
    CHECK(count_error_lines(r) == 1);
    CHECK(r.err.find(c.fragment) != std::string::npos);
    CHECK(r.seconds < 60);  // named at start-up, not after a timeout
    CHECK_FALSE(fs::exists(run / "metrics.jsonl"));
  }
}

TEST_CASE("dist: a sweep over 2 ranks writes what the one-process sweep writes") {
  TempDir tmp("dist-sweep");
  const std::vector<std::string> sweep = {
      "sweep", dist_config().string(), "--over", "model.heads=1,2,4",       "--seeds",      "1",
      "--set", "train.steps=20",       "--set",  "schedule.warmup_steps=3", "--no-progress"};
  std::vector<std::string> one = sweep, two = {HEADLAB_CLI};
  one.insert(one.end(), {"--out", (tmp / "one").string()});
  two.insert(two.end(), sweep.begin(), sweep.end());
  two.insert(two.end(), {"--out", (tmp / "two").string()});
  const RunResult a = run_cli(one);
  REQUIRE_MESSAGE(a.exit_code == 0, a.describe());
  const RunResult b = mpirun(2, two);
  REQUIRE_MESSAGE(b.exit_code == 0, b.describe());
  auto runs = [](const fs::path& dir) {
    json doc = json::parse(read_bytes(dir / "sweep.json"));
    for (json& r : doc["runs"]) r.erase("train_seconds");
    return doc.dump(1);
  };
  CHECK(runs(tmp / "two") == runs(tmp / "one"));
  CHECK(fs::file_size(tmp / "two" / "report.html") > 1000);
  CHECK(b.out.find("wrote ") != std::string::npos);
  for (const char* run : {"heads-1_seed-1", "heads-2_seed-1", "heads-4_seed-1"}) {
    CAPTURE(run);  // each run trained alone, not as a rank of the job
    CHECK(json::parse(read_bytes(tmp / "two" / run / "summary.json"))["ranks"] == 1);
  }
}
