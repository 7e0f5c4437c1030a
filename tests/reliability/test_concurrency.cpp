// One writer per run directory, readers that never fail because of it, and signals at random
// moments: a second writer of a live run is refused naming the pid; two runs started together
// into one directory leave exactly one of them; eval of a run whose retention removes a
// checkpoint after every step always succeeds; eval beside `train --overwrite` of the same run,
// again and again, reads a checkpoint or says the run is being replaced, never ENOENT; SIGTERM,
// SIGINT and SIGHUP stop training with a checkpoint and a command that continues it bit for bit;
// a sweep's runs die with it.

#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tests/reliability/cases.h"
#include "tests/reliability/process.h"
#include "tests/reliability/run_dir.h"

using namespace headlab::testing;
namespace fs = std::filesystem;

namespace {

const fs::path kConfig = source_dir() / "tests" / "reliability" / "crash.toml";

std::vector<std::string> train_args(const fs::path& out, std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"train",      kConfig.string(), "--out",
                                   out.string(), "--quiet",        "--no-analysis"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

bool wait_until(const std::function<bool()>& ready, double seconds = 60) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    if (ready()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

bool present(const fs::path& p) {
  return fs::exists(fs::symlink_status(p));
}

// Whether a process holds the lock of run directory `dir`.
bool locked(const fs::path& dir) {
  const int fd = ::open((dir / ".headlab.lock").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool held = ::flock(fd, LOCK_EX | LOCK_NB) != 0;
  ::close(fd);
  return held;
}

// The steps of metrics.jsonl's training rows, in file order.
std::vector<int64_t> metric_steps(const fs::path& run) {
  std::vector<int64_t> steps;
  std::istringstream in(read_bytes(run / "metrics.jsonl"));
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json row = nlohmann::json::parse(line);
    if (!row.value("eval", false)) steps.push_back(row.at("step").get<int64_t>());
  }
  return steps;
}

// The newest training step in metrics.jsonl (a torn last line is skipped), 0 if none.
int64_t newest_step(const fs::path& run) {
  int64_t newest = 0;
  std::string text;
  try {
    text = read_bytes(run / "metrics.jsonl");
  } catch (const std::exception&) {
    return 0;
  }
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json row = nlohmann::json::parse(line, nullptr, false);
    if (row.is_object() && row.contains("step") && row["step"].is_number_integer())
      newest = std::max(newest, row["step"].get<int64_t>());
  }
  return newest;
}

// A run that trains for a long time (stopped by SIGTERM when the test is done with it).
std::vector<std::string> live_args(const fs::path& dir, std::vector<std::string> extra) {
  extra.insert(extra.end(), {"--set", "train.steps=100000", "--set", "schedule.warmup_steps=5"});
  return train_args(dir, extra);
}

struct LiveRun {
  fs::path dir;
  CliProcess process;
  LiveRun(const fs::path& d, const std::vector<std::string>& extra)
      : dir(d), process(live_args(d, extra)) {
    REQUIRE_MESSAGE(wait_until([&] { return present(dir / "checkpoints" / "latest"); }),
                    "the live run made no checkpoint");
  }
  // Stops it gracefully; returns its result.
  RunResult stop() {
    process.signal(SIGTERM);
    return process.wait();
  }
};

std::string pid_text(const LiveRun& live) {
  return fmt::format("is in use by pid {}", live.process.pid());
}

int cases = 0;

void refused(const std::vector<std::string>& args, const std::string& fragment,
             const std::string& name) {
  const RunResult r = run_cli(args);
  show(name, r);
  ++cases;
  CHECK_MESSAGE(check_rejected(r, fragment) == "", name << ": " << check_rejected(r, fragment)
                                                        << "\n"
                                                        << r.describe());
}

}  // namespace

TEST_CASE("train: concurrency a second writer of a live run is refused, the first loses nothing") {
  TempDir tmp("concurrency-live");
  cases = 0;
  const fs::path run = tmp / "run";
  LiveRun live(run, {"--set", "train.checkpoint_every=20"});
  write_bytes(tmp / "outside", "a file beside the run");
  refused(train_args(run, {"--resume", "--set", "train.steps=100000"}), pid_text(live),
          "resume of a live run");
  refused(train_args(run, {"--overwrite"}), pid_text(live), "overwrite of a live run");
  refused({"analyze", run.string()}, pid_text(live), "analyze of a live run");
  refused({"analyze", "--report-only", run.string()}, pid_text(live), "report of a live run");
  refused(train_args(run), "already holds a run", "a fresh run into a live one");
  const RunResult r = live.stop();
  CHECK_MESSAGE(r.exit_code == 128 + SIGTERM, r.describe());
  // Every training row is there, in order, once: the refused writers appended nothing.
  const std::vector<int64_t> steps = metric_steps(run);
  REQUIRE(!steps.empty());
  for (size_t i = 0; i < steps.size(); ++i) CHECK(steps[i] == static_cast<int64_t>(i) + 1);
  CHECK(read_bytes(tmp / "outside") == "a file beside the run");
  CHECK_FALSE(locked(run));
  MESSAGE(cases << " concurrency cases on a live run (" << steps.size() << " steps)");
}

TEST_CASE(
    "train: concurrency eval of a live run never fails, though retention removes a checkpoint "
    "every step") {
  TempDir tmp("concurrency-eval");
  const fs::path run = tmp / "run";
  LiveRun live(run, {"--set", "train.checkpoint_every=1", "--set", "train.keep_checkpoints=1"});
  int evals = 0;
  for (int i = 0; i < 12; ++i) {
    const RunResult e = run_cli({"eval", run.string(), "--json"});
    ++evals;
    CHECK_MESSAGE(e.exit_code == 0, e.describe());
    // An explicit earlier checkpoint may be gone: then a clear refusal, never a crash.
    const RunResult old = run_cli({"eval", run.string(), "--checkpoint", "step-000002"});
    CHECK_MESSAGE((old.exit_code == 0 || check_rejected(old, "step-000002") == ""), old.describe());
  }
  const RunResult r = live.stop();
  CHECK_MESSAGE(r.exit_code == 128 + SIGTERM, r.describe());
  MESSAGE(evals << " evaluations of a live run, all exit 0");
}

TEST_CASE(
    "train: concurrency eval beside train --overwrite reads one run or says it is being "
    "replaced") {
  TempDir tmp("concurrency-overwrite");
  const fs::path run = tmp / "run";
  const std::vector<std::string> args =
      train_args(run, {"--set", "train.steps=10", "--set", "train.checkpoint_every=2"});
  const RunResult first = run_cli(args);
  REQUIRE_MESSAGE(first.exit_code == 0, first.describe());
  // Another thread replaces the run again and again; its results are checked here afterwards.
  std::atomic<bool> stop{false};
  std::vector<RunResult> overwrites;
  std::thread writer([&] {
    std::vector<std::string> again = args;
    again.push_back("--overwrite");
    while (!stop) overwrites.push_back(run_cli(again));
  });
  const std::string replaced =
      fmt::format("'{}' is being replaced by `headlab train --overwrite`", run.string());
  int ok = 0, being_replaced = 0;
  std::vector<std::string> problems;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(8);
  while (std::chrono::steady_clock::now() < end) {
    const RunResult e = run_cli({"eval", run.string(), "--json"});
    if (e.exit_code == 0 && e.out.find("\"accuracy\"") != std::string::npos)
      ++ok;
    else if (check_rejected(e, replaced) == "")
      ++being_replaced;
    else
      problems.push_back(e.describe());
  }
  stop = true;
  writer.join();
  for (const std::string& p : problems) CHECK_MESSAGE(false, "eval beside --overwrite: " << p);
  for (const RunResult& w : overwrites) CHECK_MESSAGE(w.exit_code == 0, w.describe());
  // Both outcomes happened, so the evaluations did overlap the replacements.
  CHECK(ok > 0);
  CHECK(being_replaced > 0);
  CHECK(overwrites.size() >= 3);
  const size_t evals = ok + being_replaced + problems.size();
  MESSAGE(evals << " evaluations beside " << overwrites.size() << " replacements: " << ok
                << " read a checkpoint, " << being_replaced << " said the run is being replaced");
}

TEST_CASE("train: concurrency two runs started together into one directory leave exactly one") {
  TempDir tmp("concurrency-race");
  for (int round = 0; round < 3; ++round) {
    const fs::path run = tmp / fmt::format("run-{}", round);
    CliProcess a(train_args(run, {"--set", "train.seed=1", "--set", "train.steps=20"}));
    CliProcess b(train_args(run, {"--set", "train.seed=2", "--set", "train.steps=20"}));
    const RunResult ra = a.wait(), rb = b.wait();
    INFO(ra.describe() << "\n" << rb.describe());
    CHECK(((ra.exit_code == 0) != (rb.exit_code == 0)));
    const RunResult& loser = ra.exit_code == 0 ? rb : ra;
    const bool clear = check_rejected(loser, "is in use by") == "" ||
                       check_rejected(loser, "already holds a run") == "";
    CHECK_MESSAGE(clear, check_rejected(loser, "already holds a run"));
    const int winner_seed = ra.exit_code == 0 ? 1 : 2;
    CHECK(read_bytes(run / "config.resolved.toml").find(fmt::format("seed = {}\n", winner_seed)) !=
          std::string::npos);
    CHECK(read_bytes(run / "summary.json").find(fmt::format("\"seed\": {}", winner_seed)) !=
          std::string::npos);
  }
  MESSAGE("3 concurrency cases: runs started together");
}

TEST_CASE("train: concurrency a live sweep and its runs have one writer each") {
  TempDir tmp("concurrency-sweep");
  const fs::path sweep = tmp / "sweep";
  CliProcess s({"sweep", kConfig.string(), "--over", "model.heads=2,4", "--out", sweep.string(),
                "--set", "train.steps=100000", "--set", "schedule.warmup_steps=5",
                "--no-progress"});
  const fs::path child = sweep / "heads-2_seed-1";
  REQUIRE(wait_until([&] { return present(child / "checkpoints" / "latest"); }));
  refused(
      {"sweep", kConfig.string(), "--over", "model.heads=2,4", "--out", sweep.string(), "--resume"},
      "is in use by pid", "a second sweep of a live one");
  refused(train_args(child, {"--resume", "--set", "train.steps=100000", "--set",
                             "schedule.warmup_steps=5", "--set", "model.heads=2"}),
          "is in use by pid", "a run of a live sweep");
  s.signal(SIGTERM);
  const RunResult r = s.wait();
  CHECK_MESSAGE(r.exit_code == 128 + SIGTERM, r.describe());
  CHECK_FALSE(locked(child));
}

// SIGTERM, SIGINT and SIGHUP at moments drawn from a fixed seed (one to eight steps into a
// session, then up to 2 ms), each session continued with the command its interrupt line gives;
// the finished run equals an uninterrupted one bit for bit.
TEST_CASE(
    "train: signals at random moments stop with a checkpoint, and the pasted command continues") {
  TempDir tmp("signals");
  const std::vector<std::string> longer = {"--set", "train.steps=120"};
  const fs::path reference = tmp / "reference";
  const RunResult ref = run_cli(train_args(reference, longer));
  REQUIRE_MESSAGE(ref.exit_code == 0, ref.describe());

  const fs::path run = tmp / "run";
  std::mt19937_64 rng(20240607);
  std::vector<std::string> next = train_args(run, longer);
  int interrupted = 0, finished_first = 0;
  const int signals[] = {SIGTERM, SIGINT, SIGHUP};
  int64_t at_step = 0;  // where the last session stopped
  for (int k = 0; k < 12 && !present(run / "summary.json"); ++k) {
    const int sig = signals[k % 3];
    CliProcess p(next);
    // A few steps into this session (the moment drawn from the seed), then a sub-step delay.
    const int64_t steps = std::uniform_int_distribution<int64_t>(1, 8)(rng);
    wait_until([&] { return newest_step(run) >= at_step + steps || !p.running(); });
    std::this_thread::sleep_for(
        std::chrono::microseconds(std::uniform_int_distribution<int>(0, 2000)(rng)));
    p.signal(sig);
    const RunResult r = p.wait();
    if (r.exit_code == 0) {
      ++finished_first;
      break;
    }
    ++interrupted;
    INFO("signal " << sig << ": " << r.describe());
    REQUIRE(r.exit_code == 128 + sig);
    REQUIRE(r.err_lines().size() == 1);
    const std::string line = r.err_lines()[0];
    const std::string head =
        fmt::format("headlab: interrupted by {} at step ", sig == SIGTERM  ? "SIGTERM"
                                                           : sig == SIGINT ? "SIGINT"
                                                                           : "SIGHUP");
    CHECK(line.rfind(head, 0) == 0);
    const std::string marker = "continue with: ";
    const size_t at = line.find(marker);
    REQUIRE(at != std::string::npos);
    std::vector<std::string> hint = split_args(line.substr(at + marker.size()), {});
    REQUIRE(!hint.empty());
    CHECK(hint[0] == HEADLAB_CLI);
    next.assign(hint.begin() + 1, hint.end());
    at_step = std::stoll(line.substr(head.size()));
    // The checkpoint it names is complete: eval reads and verifies it.
    const RunResult e = run_cli({"eval", run.string(), "--json"});
    CHECK_MESSAGE(e.exit_code == 0, e.describe());
  }
  if (!present(run / "summary.json")) {
    const RunResult last = run_cli(next);
    REQUIRE_MESSAGE(last.exit_code == 0, last.describe());
  }
  MESSAGE(interrupted << " sessions interrupted by a signal, " << finished_first
                      << " finished before its signal");
  CHECK(interrupted >= 6);
  const fs::path a =
      reference / "checkpoints" / fs::read_symlink(reference / "checkpoints" / "latest");
  const fs::path b = run / "checkpoints" / fs::read_symlink(run / "checkpoints" / "latest");
  CHECK(a.filename() == b.filename());
  CHECK_MESSAGE(tensors_of(a / "model.safetensors") == tensors_of(b / "model.safetensors"),
                "the interrupted run's weights differ from the uninterrupted run's");
  CHECK(tensors_of(a / "optimizer.safetensors") == tensors_of(b / "optimizer.safetensors"));
  CHECK(metrics_without_timing(reference / "metrics.jsonl") ==
        metrics_without_timing(run / "metrics.jsonl"));
}

// Two or three stop signals a few milliseconds apart (a double Ctrl-C, the kernel's SIGTERM after
// a sweep's) stop the run like one: its line, a checkpoint, run.json "interrupted", and eval.
TEST_CASE("train: signals a second and third Ctrl-C still leave a consistent run and its line") {
  TempDir tmp("signals-twice");
  std::mt19937 rng(20261201);
  for (int trial = 0; trial < 6; ++trial) {
    const fs::path run = tmp / fmt::format("run-{}", trial);
    LiveRun live(run, {"--set", "train.checkpoint_every=10"});
    const int signals = 2 + trial % 2;
    for (int k = 0; k < signals; ++k) {
      live.process.signal(trial < 2 ? SIGINT : k == 0 ? SIGINT : SIGTERM);
      std::this_thread::sleep_for(std::chrono::microseconds(rng() % 12000));
    }
    const RunResult r = live.process.wait();
    INFO("trial " << trial << ": " << r.describe());
    // Signals sent microseconds apart may be handled on two threads at once, so either may be
    // the one that counts; the exit code, the line and run.json must all name that one.
    REQUIRE((r.exit_code == 130 || (trial >= 2 && r.exit_code == 143)));
    const std::string name = r.exit_code == 130 ? "SIGINT" : "SIGTERM";
    REQUIRE_FALSE(r.err_lines().empty());
    CHECK(r.err_lines().back().find("headlab: interrupted by " + name) == 0);
    CHECK(r.err_lines().back().find("checkpoint saved; continue with:") != std::string::npos);
    const nlohmann::json j = nlohmann::json::parse(read_bytes(run / "run.json"));
    CHECK(j["outcome"] == "interrupted by " + name);
    const RunResult e = run_cli({"eval", run.string(), "--json"});
    CHECK_MESSAGE(e.exit_code == 0, e.describe());
  }
}

// A sweep stopped by SIGTERM or SIGINT stops its runs (each writes a checkpoint), writes
// sweep.json, and --resume finishes it; killed with SIGKILL, its runs still stop (the kernel
// sends them SIGTERM) and --resume finishes it too.
TEST_CASE("train: signals a sweep's runs die with it, and --resume continues the sweep") {
  TempDir tmp("signals-sweep");
  int n = 0;
  for (const int sig : {SIGTERM, SIGINT, SIGKILL}) {
    const fs::path sweep = tmp / fmt::format("sweep-{}", n++);
    const std::vector<std::string> args = {
        "sweep", kConfig.string(), "--over", "model.heads=2,4", "--jobs",       "2",
        "--out", sweep.string(),   "--set",  "train.steps=100", "--no-progress"};
    CliProcess s(args);
    const fs::path a = sweep / "heads-2_seed-1", b = sweep / "heads-4_seed-1";
    REQUIRE(wait_until([&] {
      return present(a / "checkpoints" / "latest") && present(b / "checkpoints" / "latest");
    }));
    s.signal(sig);
    const RunResult r = s.wait();
    INFO("signal " << sig << ": " << r.describe());
    // Its runs stop too: their locks are free soon (each finishes its step and checkpoints).
    CHECK(wait_until([&] { return !locked(a) && !locked(b); }, 60));
    if (sig != SIGKILL) {
      CHECK(r.exit_code == 128 + sig);
      REQUIRE_FALSE(r.err_lines().empty());
      CHECK(r.err_lines().back().find("sweep.json written; continue with:") != std::string::npos);
      const nlohmann::json j = nlohmann::json::parse(read_bytes(sweep / "sweep.json"));
      for (const auto& run : j["runs"])
        CHECK(run["error"].get<std::string>().find("interrupted") != std::string::npos);
    } else {
      CHECK(r.signal == SIGKILL);
    }
    std::vector<std::string> resume = args;
    resume.push_back("--resume");
    const RunResult again = run_cli(resume);
    CHECK_MESSAGE(again.exit_code == 0, again.describe());
    const nlohmann::json j = nlohmann::json::parse(read_bytes(sweep / "sweep.json"));
    REQUIRE(j["runs"].size() == 2);
    for (const auto& run : j["runs"]) CHECK(run["ok"] == true);
    CHECK(read_bytes(a / "train.log").find("resuming at step") != std::string::npos);
  }
}

// The continue-command of a run whose --out holds control characters stays on one line, and a
// shell reads its --out back as the same bytes (bash's $'...', as the error lines escape them).
TEST_CASE("train: signals the printed continue-command escapes control characters") {
  TempDir tmp("signals-control");
  const fs::path run = tmp / "run\nwith\ttabs\x1b[31m";
  LiveRun live(run, {});
  const RunResult r = live.stop();
  REQUIRE_MESSAGE(r.exit_code == 143, r.describe());
  const std::string err = r.err;
  for (char c : err) CHECK_MESSAGE((c == '\n' || static_cast<unsigned char>(c) >= 0x20), r.err);
  REQUIRE_FALSE(r.err_lines().empty());
  const std::string line = r.err_lines().back();
  const std::string marker = "continue with: ";
  const size_t at = line.find(marker);
  REQUIRE_MESSAGE(at != std::string::npos, line);
  // The command's words, as bash splits and unquotes them, NUL-separated by printf.
  const std::string command = line.substr(at + marker.size());
  RunOptions bash;
  bash.program = "/bin/bash";
  const RunResult words = run_cli({"-c", "printf '%s\\0' " + command}, bash);
  REQUIRE_MESSAGE(words.exit_code == 0, words.describe());
  std::vector<std::string> args;
  for (size_t from = 0; from < words.out.size();) {
    const size_t end = words.out.find('\0', from);
    args.push_back(words.out.substr(from, end - from));
    from = end + 1;
  }
  const auto out = std::find(args.begin(), args.end(), "--out");
  REQUIRE(out != args.end());
  REQUIRE(out + 1 != args.end());
  CHECK(*(out + 1) == run.string());
  CHECK(std::find(args.begin(), args.end(), "--resume") != args.end());
}

// A sweep killed (SIGKILL) at random moments: its runs stop too (some between their last step
// and their analysis, with summary.json and no heads.json), and one --resume completes every run
// (analysis included) with exit 0 and the uninterrupted sweep's figures.
TEST_CASE("train: signals a sweep killed at random moments is completed by one --resume") {
  TempDir tmp("signals-sweep-random");
  const auto args = [&](const fs::path& out) {
    return std::vector<std::string>{
        "sweep", kConfig.string(), "--over", "model.heads=2,4", "--jobs",       "2",
        "--out", out.string(),     "--set",  "train.steps=20",  "--no-progress"};
  };
  const fs::path reference = tmp / "reference";
  const auto t0 = std::chrono::steady_clock::now();
  const RunResult ref = run_cli(args(reference));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  REQUIRE_MESSAGE(ref.exit_code == 0, ref.describe());
  const std::vector<std::string> runs = {"heads-2_seed-1", "heads-4_seed-1"};
  std::mt19937 rng(1201);
  std::uniform_real_distribution<double> moment(0.15 * seconds, 1.05 * seconds);
  int without_analysis = 0;
  for (int trial = 0; trial < 5; ++trial) {
    const fs::path sweep = tmp / fmt::format("sweep-{}", trial);
    {
      CliProcess s(args(sweep));
      std::this_thread::sleep_for(std::chrono::duration<double>(moment(rng)));
      s.signal(SIGKILL);
      s.wait();
    }
    // Its runs stop when they see the kernel's SIGTERM (their locks are then free).
    for (const std::string& run : runs)
      REQUIRE(wait_until([&] { return !locked(sweep / run); }, 60));
    for (const std::string& run : runs)
      without_analysis +=
          present(sweep / run / "summary.json") && !present(sweep / run / "heads.json");
    std::vector<std::string> resume = args(sweep);
    resume.push_back("--resume");
    const RunResult again = run_cli(resume);
    INFO("trial " << trial << ": " << again.describe());
    CHECK(again.exit_code == 0);
    const nlohmann::json j = nlohmann::json::parse(read_bytes(sweep / "sweep.json"));
    REQUIRE(j["runs"].size() == 2);
    for (const auto& run : j["runs"]) CHECK(run["ok"] == true);
    for (const std::string& run : runs) {
      const auto a = nlohmann::json::parse(read_bytes(reference / run / "heads.json"));
      const auto b = nlohmann::json::parse(read_bytes(sweep / run / "heads.json"));
      CHECK_MESSAGE(a["specialization"] == b["specialization"], run);
      CHECK_MESSAGE(a["eval"] == b["eval"], run);
    }
  }
  MESSAGE(without_analysis << " runs were stopped between their last step and their analysis");
}

// The same state made on purpose, every time: a complete sweep whose run lost its analysis
// (stopped after its last step) is completed by --resume, and is not "complete" to
// --report-only; a run that fails is trained again by --resume and left by --skip-failed, and
// the sweep exits non-zero while any run is not complete.
TEST_CASE("train: signals a sweep exits 0 only when every run is complete") {
  TempDir tmp("sweep-complete");
  const fs::path sweep = tmp / "sweep";
  std::vector<std::string> args = {"sweep",        kConfig.string(),
                                   "--over",       "optim.lr=5e-3,1e30",
                                   "--out",        sweep.string(),
                                   "--set",        "train.steps=10",
                                   "--set",        "schedule.name=\"constant\"",
                                   "--no-progress"};
  const RunResult first = run_cli(args);
  CHECK_MESSAGE(first.exit_code == 3, first.describe());  // lr 1e30 explodes
  const fs::path good = sweep / "lr-5e-3_seed-1";
  REQUIRE(present(good / "heads.json"));
  const std::string heads = read_bytes(good / "heads.json");
  for (const char* f : {"heads.json", "attention.npy", "report.html"}) fs::remove(good / f);
  std::vector<std::string> report = args;
  report.back() = "--report-only";  // in place of --no-progress
  const RunResult r = run_cli(report);
  CHECK_MESSAGE(r.exit_code == 1, r.describe());
  REQUIRE_FALSE(r.err_lines().empty());
  CHECK(r.err_lines().back().find("2 of 2 runs are not complete") != std::string::npos);
  CHECK(r.err_lines().back().find("--resume") != std::string::npos);
  std::vector<std::string> resume = args;
  resume.push_back("--resume");
  const RunResult again = run_cli(resume);  // completes the good run, retries the bad one
  CHECK_MESSAGE(again.exit_code == 3, again.describe());
  CHECK(present(good / "heads.json"));
  CHECK(nlohmann::json::parse(read_bytes(good / "heads.json"))["specialization"] ==
        nlohmann::json::parse(heads)["specialization"]);
  CHECK(again.err.find("optim.lr=1e30 seed=1 failed: headlab train exited with code 3") !=
        std::string::npos);
  resume.push_back("--skip-failed");
  const RunResult skipped = run_cli(resume);
  CHECK_MESSAGE(skipped.exit_code == 1, skipped.describe());
  REQUIRE_FALSE(skipped.err_lines().empty());
  CHECK(skipped.err_lines().back().find("1 of 2 runs are not complete") != std::string::npos);
  CHECK(skipped.err.find("optim.lr=1e30 seed=1 failed: its last session failed") !=
        std::string::npos);
  const nlohmann::json j = nlohmann::json::parse(read_bytes(sweep / "sweep.json"));
  CHECK(j["runs"][0]["ok"] == true);
  CHECK(j["runs"][1]["ok"] == false);
  CHECK(j["runs"][1]["error"].get<std::string>().find("--skip-failed") != std::string::npos);
}
