// Several hosts for real, on this machine (tests/distributed/fake_hosts.h): ranks on hosts that
// share no filesystem and talk over the network the documented settings name
// (docs/distributed.md, "Several hosts"). Training equals one process bit for bit, only rank 0's
// host holds the run directory, a run resumes from there, a sweep ends whole there (also
// resumed on other hosts than before), and a killed host ends the job quickly. Skipped, saying why, where namespaces cannot be made.

#include <doctest/doctest.h>

#include <signal.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tests/distributed/fake_hosts.h"
#include "tests/distributed/mpi_runs.h"
#include "tests/reliability/run_dir.h"

using namespace headlab::testing;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

bool skipped() {
  const std::string why = FakeHosts::unavailable();
  if (!why.empty()) MESSAGE("skipped: " << why);
  return !why.empty();
}

// The interface settings docs/distributed.md gives for hosts with several networks, then
// `ranks` ranks unbound (each host's one slot has one core's worth of work).
std::vector<std::string> across(int ranks, std::vector<std::string> command) {
  const std::string net = FakeHosts::data_network();
  std::vector<std::string> a = {
      "--mca", "btl_tcp_if_include", net,    "--mca", "oob_tcp_if_include",
      net,     "--bind-to",          "none", "-np",   std::to_string(ranks)};
  a.insert(a.end(), command.begin(), command.end());
  return a;
}

const std::vector<std::string> kSets = {"train.steps=12", "train.batch_size=8",
                                        "train.eval_every=6", "train.eval_batches=4",
                                        "schedule.warmup_steps=3"};

std::vector<std::string> with(std::vector<std::string> sets, const std::string& more) {
  sets.push_back(more);
  return sets;
}

}  // namespace

TEST_CASE("dist: hosts: ranks on two hosts train as one process does, over the chosen network") {
  if (skipped()) return;
  TempDir tmp("dist-hosts-identity");
  FakeHosts hosts(tmp.path(), 2);
  const fs::path one = tmp / "one";
  const RunResult ref = alone(train_args(one, with(kSets, "train.grad_accum=2")));
  REQUIRE_MESSAGE(ref.exit_code == 0, ref.describe());

  const uint64_t data_before = hosts.data_bytes_sent(1), other_before = hosts.other_bytes_sent(1);
  const RunResult r =
      hosts.mpirun(1, across(2, train_args(hosts.shared_path() / "run", kSets)), mpirun_options());
  REQUIRE_MESSAGE(r.exit_code == 0, r.describe());
  check_same(outcome(hosts.private_dir(0) / "run"), outcome(one), "2 hosts vs one process x 2");
  // Rank 1 never touches the run directory: its host has none.
  CHECK_FALSE(fs::exists(hosts.private_dir(1) / "run"));
  CHECK(fs::is_empty(hosts.shared_path()));

  // Every step, rank 1 sends its gradient sum (4 bytes a parameter) to rank 0: over data.
  const json summary = json::parse(read_bytes(hosts.private_dir(0) / "run" / "summary.json"));
  const uint64_t gradients = 12 * 4 * summary.at("parameters").get<uint64_t>();
  const uint64_t data = hosts.data_bytes_sent(1) - data_before;
  const uint64_t other = hosts.other_bytes_sent(1) - other_before;
  CHECK_MESSAGE(data >= gradients, data << " bytes on data for " << gradients << " of gradients");
  CHECK_MESSAGE(other < 64 * 1024, other << " bytes on the network the settings exclude");
}

TEST_CASE("dist: hosts: a run killed on three hosts resumes from rank 0's host, bit for bit") {
  if (skipped()) return;
  TempDir tmp("dist-hosts-resume");
  FakeHosts hosts(tmp.path(), 3);
  const std::vector<std::string> sets = {"train.steps=20", "train.checkpoint_every=5",
                                         "train.eval_every=10", "schedule.warmup_steps=3",
                                         "train.batch_size=8"};
  const fs::path one = tmp / "one";
  const RunResult ref = alone(train_args(one, with(sets, "train.grad_accum=3")));
  REQUIRE_MESSAGE(ref.exit_code == 0, ref.describe());

  // Rank 0 is killed inside its second checkpoint (its 9th rename, as in "dist: resume under
  // mpirun ..."): the job ends; the last complete checkpoint is on host A only.
  const fs::path run = hosts.shared_path() / "run";
  std::vector<std::string> crash = across(
      1, {"-x", std::string("LD_PRELOAD=") + HEADLAB_KILL_SHIM, "-x", "HEADLAB_KILL_AT=rename:9",
          "-x", "ASAN_OPTIONS=" + asan_options("verify_asan_link_order=0")});
  for (const std::string& a : train_args(run, sets)) crash.push_back(a);
  crash.insert(crash.end(), {":", "-np", "2"});
  for (const std::string& a : train_args(run, sets)) crash.push_back(a);
  const RunResult c = hosts.mpirun(1, crash, mpirun_options());
  REQUIRE_MESSAGE(c.exit_code != 0, c.describe());
  const fs::path on_a = hosts.private_dir(0) / "run";
  REQUIRE(fs::exists(on_a / "checkpoints" / "latest"));
  CHECK(fs::read_symlink(on_a / "checkpoints" / "latest").string() < "step-000020");
  CHECK_FALSE(fs::exists(hosts.private_dir(1) / "run"));
  CHECK_FALSE(fs::exists(hosts.private_dir(2) / "run"));

  const RunResult r =
      hosts.mpirun(1, across(3, train_args(run, sets, /*resume=*/true)), mpirun_options());
  REQUIRE_MESSAGE(r.exit_code == 0, r.describe());
  check_same(outcome(on_a), outcome(one), "3 hosts resumed vs one process x 3");
}

TEST_CASE("dist: hosts: a killed host ends the job quickly") {
  if (skipped()) return;
  TempDir tmp("dist-hosts-kill");
  FakeHosts hosts(tmp.path(), 2);
  const std::string tag = fmt::format("{}-hosts-kill", ::getpid());
  const std::vector<std::string> endless = {"train.steps=1000000", "schedule.warmup_steps=3",
                                            "train.eval_every=0", "train.checkpoint_every=0"};
  const fs::path run = hosts.shared_path() / "run";
  std::vector<std::string> command = {"-x", "HEADLAB_TEST_TAG=" + tag};
  for (const std::string& a : train_args(run, endless)) command.push_back(a);
  RunResult r;
  std::thread job([&] { r = hosts.mpirun(1, across(2, command), mpirun_options()); });
  // Once rank 1 trains (rank 0 has logged steps), every process of host B dies at once.
  bool training = false;
  const auto start = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - start < std::chrono::seconds(120)) {
    training =
        find_rank(tag, 1) > 0 && lines_in(hosts.private_dir(0) / "run" / "metrics.jsonl") >= 3;
    if (training) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const auto killed = std::chrono::steady_clock::now();
  hosts.kill_host(1);
  job.join();
  const double after =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
  REQUIRE_MESSAGE(training, "rank 1 never trained: " << r.describe());
  CHECK(r.exit_code != 0);
  CHECK_MESSAGE(after < 30, after << " s after the kill\n" << r.describe());
  // What Open MPI prints depends on when the daemon died ("lost communication with a remote
  // daemon", or "unable to reliably start one or more daemons"). Rank 0's own pending MPI call
  // then holds the MPI lock, so its presence call asks over TCP: one line names the rank and
  // the host that are gone.
  CHECK(fs::exists(hosts.private_dir(0) / "run" / "config.resolved.toml"));
  CHECK_MESSAGE(r.err.find(fmt::format("headlab: error: train: rank 1 on {} ended during the run "
                                       "(killed, crashed, or its host went down); rank 0 on {} "
                                       "is still there",
                                       hosts.name(1), hosts.name(0))) != std::string::npos,
                r.describe());
  CHECK_MESSAGE(count_error_lines(r) == 1, r.describe());
}

TEST_CASE("dist: hosts: a sweep over two hosts ends with every run directory on rank 0's host") {
  if (skipped()) return;
  TempDir tmp("dist-hosts-sweep");
  FakeHosts hosts(tmp.path(), 2);
  const std::vector<std::string> sweep = {
      "sweep", dist_config().string(), "--over", "model.heads=1,2,4",       "--seeds",      "1",
      "--set", "train.steps=20",       "--set",  "schedule.warmup_steps=3", "--no-progress"};
  std::vector<std::string> one = sweep, two = {HEADLAB_CLI};
  one.insert(one.end(), {"--out", (tmp / "one").string()});
  two.insert(two.end(), sweep.begin(), sweep.end());
  two.insert(two.end(), {"--out", (hosts.shared_path() / "two").string()});
  const RunResult a = run_cli(one);
  REQUIRE_MESSAGE(a.exit_code == 0, a.describe());
  const RunResult b = hosts.mpirun(1, across(2, two), mpirun_options());
  REQUIRE_MESSAGE(b.exit_code == 0, b.describe());

  // heads-2 was trained by rank 1 on host B, and brought to host A whole.
  const fs::path on_a = hosts.private_dir(0) / "two";
  for (const char* run : {"heads-1_seed-1", "heads-2_seed-1", "heads-4_seed-1"}) {
    CAPTURE(run);
    REQUIRE(fs::exists(on_a / run / "summary.json"));
    CHECK(read_bytes(on_a / run / "heads.json") == read_bytes(tmp / "one" / run / "heads.json"));
    CHECK(metrics_without_timing(on_a / run / "metrics.jsonl") ==
          metrics_without_timing(tmp / "one" / run / "metrics.jsonl"));
    CHECK(fs::is_symlink(on_a / run / "checkpoints" / "latest"));
  }
  CHECK(fs::exists(hosts.private_dir(1) / "two" / "heads-2_seed-1" / "summary.json"));
  CHECK_FALSE(fs::exists(hosts.private_dir(1) / "two" / "heads-1_seed-1"));
  CHECK(read_bytes(on_a / "sweep.log").find("brought 1 run directories") != std::string::npos);

  // So the sweep's report can be rewritten from host A alone.
  const RunResult again =
      run_cli({"sweep", dist_config().string(), "--over", "model.heads=1,2,4", "--seeds", "1",
               "--set", "train.steps=20", "--set", "schedule.warmup_steps=3", "--out",
               on_a.string(), "--report-only"});
  CHECK_MESSAGE(again.exit_code == 0, again.describe());
}

TEST_CASE("dist: hosts: a sweep resumed on three hosts, one of them new, ends whole on rank 0's") {
  if (skipped()) return;
  TempDir tmp("dist-hosts-sweep-resume");
  FakeHosts hosts(tmp.path(), 3);
  const auto sweep = [](const fs::path& out, int steps, bool resume) {
    std::vector<std::string> a = {"sweep",         dist_config().string(),
                                  "--over",        "model.heads=1,2,4",
                                  "--seeds",       "1",
                                  "--set",         fmt::format("train.steps={}", steps),
                                  "--set",         "schedule.warmup_steps=3",
                                  "--no-progress", "--out",
                                  out.string()};
    if (resume) a.push_back("--resume");
    return a;
  };
  const auto on_hosts = [&](int ranks, std::vector<std::string> args) {
    args.insert(args.begin(), HEADLAB_CLI);
    return hosts.mpirun(1, across(ranks, args), mpirun_options());
  };
  // The same two sessions in one process: 10 steps, then resumed to 20.
  for (const bool resume : {false, true}) {
    const RunResult r = run_cli(sweep(tmp / "one", resume ? 20 : 10, resume));
    REQUIRE_MESSAGE(r.exit_code == 0, r.describe());
  }
  // 10 steps on hosts A and B, then resumed on A, B and C: heads-2 resumes on B from B's own
  // copy (the same as A's), heads-4 on C from the copy A sends, and both come back to A.
  const fs::path out = hosts.shared_path() / "two";
  const RunResult first = on_hosts(2, sweep(out, 10, false));
  REQUIRE_MESSAGE(first.exit_code == 0, first.describe());
  const RunResult second = on_hosts(3, sweep(out, 20, true));
  REQUIRE_MESSAGE(second.exit_code == 0, second.describe());

  const fs::path on_a = hosts.private_dir(0) / "two";
  for (const char* run : {"heads-1_seed-1", "heads-2_seed-1", "heads-4_seed-1"}) {
    CAPTURE(run);
    REQUIRE(fs::exists(on_a / run / "summary.json"));
    CHECK(json::parse(read_bytes(on_a / run / "summary.json")).at("steps") == 20);
    CHECK(json::parse(read_bytes(on_a / run / "run.json")).at("sessions").size() == 2);
    CHECK(read_bytes(on_a / run / "heads.json") == read_bytes(tmp / "one" / run / "heads.json"));
    check_same(outcome(on_a / run), outcome(tmp / "one" / run), "resumed on 3 hosts vs alone");
  }
  CHECK(
      fs::exists(hosts.private_dir(2) / "two" / "heads-4_seed-1" / "checkpoints" / "step-000020"));
  CHECK_FALSE(fs::exists(hosts.private_dir(2) / "two" / "heads-2_seed-1"));
  const std::string log = read_bytes(on_a / "sweep.log");
  CHECK_MESSAGE(log.find("sent 1 run directories") != std::string::npos, log);
  CHECK_MESSAGE(log.find("brought 2 run directories") != std::string::npos, log);
}
