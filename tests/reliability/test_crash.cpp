// Crash safety through the CLI: SIGKILL at moments drawn from a fixed seed (inside checkpoint
// writes through the kill shim, and on timers), then --resume until the run finishes, must give
// the final weights of an uninterrupted run bit for bit, and `latest` must only ever name a
// complete checkpoint. A full file system (RLIMIT_FSIZE) and a NaN loss must stop the run with
// a clear error and leave the previous checkpoints as they were.

#include <doctest/doctest.h>

#include <signal.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tests/reliability/cases.h"
#include "tests/reliability/process.h"
#include "tests/reliability/run_dir.h"
#include "train/io/checksum.h"
#include "train/io/npy.h"
#include "train/run/checkpoint.h"

using namespace headlab::testing;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const fs::path kConfig = source_dir() / "tests" / "reliability" / "crash.toml";

RunResult train(const fs::path& out, bool resume, const std::vector<std::string>& extra = {},
                RunOptions options = {}) {
  std::vector<std::string> args = {"train",      kConfig.string(), "--out",
                                   out.string(), "--no-progress",  "--no-analysis"};
  if (resume) args.push_back("--resume");
  args.insert(args.end(), extra.begin(), extra.end());
  return run_cli(args, options);
}

// The environment that preloads the kill shim. ASan wants to come first in the preload list;
// the shim is not instrumented, so its place there is harmless.
std::vector<std::string> shim_env(const std::string& kill_at, const fs::path& counts = {}) {
  const char* asan = std::getenv("ASAN_OPTIONS");
  std::vector<std::string> env = {std::string("LD_PRELOAD=") + HEADLAB_KILL_SHIM,
                                  std::string("ASAN_OPTIONS=") +
                                      (asan ? std::string(asan) + ":" : "") +
                                      "verify_asan_link_order=0"};
  if (!kill_at.empty()) env.push_back("HEADLAB_KILL_AT=" + kill_at);
  if (!counts.empty()) env.push_back("HEADLAB_KILL_COUNTS=" + counts.string());
  return env;
}

// What a finished run leaves: the final checkpoint's tensors and metadata bit for bit (all but
// the run id, which differs between runs), its RNG state, and the metrics without timing fields.
struct Outcome {
  std::string model, optimizer, rng, metrics;
  int64_t step = -1;
};

Outcome outcome(const fs::path& run) {
  Outcome o;
  const fs::path dir = run / "checkpoints" / fs::read_symlink(run / "checkpoints" / "latest");
  o.model = tensors_of(dir / "model.safetensors");
  o.optimizer = tensors_of(dir / "optimizer.safetensors");
  const json state = json::parse(read_bytes(dir / "state.json"));
  o.rng = state.at("rng").dump();
  o.step = state.at("step").get<int64_t>();
  o.metrics = metrics_without_timing(run / "metrics.jsonl");
  return o;
}

// After a crash: `latest` is absent or names a checkpoint that loads completely (every file,
// every tensor) and is not older than the one before. Returns its step, or -1.
int64_t check_latest_complete(const fs::path& run, int64_t previous, const std::string& when) {
  std::optional<fs::path> latest;
  try {
    latest = headlab::latest_checkpoint(run);
  } catch (const headlab::Error& e) {
    FAIL(when << ": checkpoints/latest is broken: " << e.what());
  }
  if (!latest) {
    CHECK_MESSAGE(previous < 0, when << ": latest vanished after step " << previous);
    return -1;
  }
  int64_t step = -1;
  try {
    const headlab::CheckpointData c = headlab::load_checkpoint(run);
    step = c.step;
    CHECK(!c.model.empty());
    CHECK(!c.optimizer.empty());
  } catch (const headlab::Error& e) {
    FAIL(when << ": latest names an incomplete checkpoint: " << e.what());
  }
  CHECK_MESSAGE(step >= previous, when << ": latest went back from " << previous << " to " << step);
  return step;
}

bool has_partial_checkpoint(const fs::path& run) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(run / "checkpoints", ec))
    if (e.path().filename().string().rfind(".tmp-", 0) == 0) return true;
  return false;
}

std::string last_line(const RunResult& r) {
  const auto lines = r.err_lines();
  return lines.empty() ? "" : lines.back();
}

Snapshot checkpoints_of(const fs::path& run) {
  return snapshot(run / "checkpoints");
}

// The analysis files in `dir` are one set: attention_tokens.json carries heads.json's id and
// step, and heads.json's digests match attention.npy and attention_tokens.json.
bool one_analysis_set(const fs::path& dir) {
  const json heads = json::parse(read_bytes(dir / "heads.json"));
  const std::string tokens_text = read_bytes(dir / "attention_tokens.json");
  const json tokens = json::parse(tokens_text);
  const json& a = heads.at("analysis");
  return tokens.at("analysis").at("id") == a.at("id") &&
         tokens.at("analysis").at("step") == a.at("step") &&
         a.at("files").at("attention_tokens.json") == headlab::checksum_hex(tokens_text) &&
         a.at("files").at("attention.npy") ==
             headlab::npy_digest(headlab::read_npy((dir / "attention.npy").string()));
}

}  // namespace

TEST_CASE("train: crash SIGKILL or EIO at every rename of analyze leaves one set or a refusal") {
  TempDir tmp("crash-analyze");
  const fs::path base = tmp / "base";
  const RunResult t = run_cli({"train", kConfig.string(), "--out", base.string(), "--quiet",
                               "--set", "train.steps=10", "--set", "train.checkpoint_every=5"});
  REQUIRE_MESSAGE(t.exit_code == 0, t.describe());
  REQUIRE(one_analysis_set(base));
  // Another analysis of the same checkpoint (fewer example sentences): a set unlike the first.
  const std::vector<std::string> again = {"analyze", "", "--examples", "2"};
  const fs::path counted = tmp / "counted", counts = tmp / "counts.txt";
  copy_tree(base, counted);
  std::vector<std::string> args = again;
  args[1] = counted.string();
  RunOptions shimmed;
  shimmed.env = shim_env("", counts);
  const RunResult c = run_cli(args, shimmed);
  REQUIRE_MESSAGE(c.exit_code == 0, c.describe());
  std::istringstream words(read_bytes(counts));
  std::string word;
  long renames = 0;
  while (words >> word)
    if (word == "rename") words >> renames;
  REQUIRE(renames >= 4);  // attention.npy, attention_tokens.json, heads.json, report.html
  int refused = 0, consistent = 0;
  for (const char* how : {"", ":fail"}) {
    for (long k = 1; k <= renames; ++k) {
      const std::string when = fmt::format("rename:{}{}", k, how);
      const fs::path run = tmp / ("run-" + std::to_string(k) + (*how ? "-eio" : ""));
      copy_tree(base, run);
      args[1] = run.string();
      RunOptions shimmed;
      shimmed.env = shim_env(when);
      const RunResult killed = run_cli(args, shimmed);
      if (*how)
        CHECK_MESSAGE(killed.exit_code == 2, when << ": " << killed.describe());
      else
        CHECK_MESSAGE(killed.signal == SIGKILL, when << ": " << killed.describe());
      const bool one_set = one_analysis_set(run);
      const Snapshot before = snapshot(run);
      const RunResult report = run_cli({"analyze", "--report-only", run.string()});
      if (one_set) {
        ++consistent;
        CHECK_MESSAGE(report.exit_code == 0, when << ": " << report.describe());
      } else {
        ++refused;
        CHECK_MESSAGE(check_rejected(report, "are of two analyses") == "",
                      when << ": " << check_rejected(report, "are of two analyses") << "\n"
                           << report.describe());
        CHECK_MESSAGE(snapshot_diff(before, snapshot(run)) == "", when);  // not even the lock
      }
      // A plain analyze redoes the files as one set.
      const RunResult redo = run_cli({"analyze", run.string()});
      CHECK_MESSAGE(redo.exit_code == 0, when << ": " << redo.describe());
      CHECK_MESSAGE(one_analysis_set(run), when);
      CHECK(run_cli({"analyze", "--report-only", run.string()}).exit_code == 0);
      fs::remove_all(run);
    }
  }
  // Between the first and the last analysis file's rename the files are of two analyses.
  CHECK(refused >= 4);
  CHECK(consistent >= 2);
  const long interrupted = 2 * renames;
  MESSAGE(interrupted << " interrupted analyses: " << refused << " refused as two sets, "
                      << consistent << " left one set");
}

TEST_CASE("train: crash SIGKILL in training and checkpoint writes, then resume, is bit-identical") {
  TempDir tmp("crash");
  // The uninterrupted run, counting the file-system calls a whole run makes.
  const fs::path reference = tmp / "reference", counts = tmp / "counts.txt";
  RunOptions counting;
  counting.env = shim_env("", counts);
  const RunResult ref = train(reference, false, {}, counting);
  REQUIRE_MESSAGE(ref.exit_code == 0, ref.describe());
  const Outcome expected = outcome(reference);
  REQUIRE(expected.step == 60);
  long fsyncs = 0, renames = 0, writes = 0;
  REQUIRE(std::sscanf(read_bytes(counts).c_str(), "fsync %ld rename %ld write %ld", &fsyncs,
                      &renames, &writes) == 3);
  REQUIRE(fsyncs > 20);
  REQUIRE(renames > 10);

  // Kill moments from a fixed seed: at the k-th fsync, rename or write of a session (inside a
  // checkpoint save for most k), and on timers of up to half the uninterrupted wall time.
  std::mt19937_64 rng(20240607);
  auto pick = [&](long hi) {
    return std::uniform_int_distribution<long>(1, std::max(1L, hi))(rng);
  };
  std::vector<std::string> kills;
  for (int round = 0; round < 2; ++round) {
    kills.push_back(fmt::format("fsync:{}", pick(fsyncs / 3)));
    kills.push_back(fmt::format("rename:{}{}", pick(renames / 3), round ? ":after" : ""));
    kills.push_back(fmt::format("write:{}", pick(writes / 3)));
  }
  std::vector<double> timers;
  for (int i = 0; i < 3; ++i)
    timers.push_back(std::uniform_real_distribution<double>(0.0, 0.5)(rng) * ref.seconds);

  const fs::path run = tmp / "crashed";
  int64_t latest = -1;
  int killed = 0, partial = 0, finished_early = 0;
  auto attempt = [&](const std::string& kill_at, double timer) {
    const bool resume = latest >= 0;
    if (!resume) fs::remove_all(run);  // killed before its first checkpoint: start again
    RunOptions o;
    if (!kill_at.empty()) o.env = shim_env(kill_at);
    o.kill_after_seconds = timer;
    const std::string what = fmt::format("kill at {}{}", kill_at.empty() ? "timer " : kill_at,
                                         kill_at.empty() ? fmt::format("{:.3f} s", timer) : "");
    const RunResult r = train(run, resume, {}, o);
    if (r.exit_code == 0) {
      ++finished_early;
    } else {
      REQUIRE_MESSAGE(r.signal == SIGKILL, what << ": " << r.describe());
      ++killed;
      partial += has_partial_checkpoint(run);
    }
    latest = check_latest_complete(run, latest, what);
  };
  for (const auto& k : kills) attempt(k, -1);
  for (double t : timers) attempt("", t);

  // Resume until it finishes; it must take no more than a couple of tries.
  for (int i = 0; i < 3 && !(fs::exists(run / "summary.json") && latest == 60); ++i) {
    const RunResult r = train(run, latest >= 0);
    REQUIRE_MESSAGE(r.exit_code == 0, r.describe());
    latest = check_latest_complete(run, latest, "final resume");
  }
  std::string schedule;
  for (const auto& k : kills) schedule += k + " ";
  for (double t : timers) schedule += fmt::format("timer:{:.3f}s ", t);
  MESSAGE("kill schedule: " << schedule);
  MESSAGE(killed << " kills (" << partial << " left a partial checkpoint behind), "
                 << finished_early << " sessions finished before their kill");
  CHECK(killed >= 6);
  CHECK(partial >= 1);  // at least one kill landed inside a checkpoint write

  const Outcome got = outcome(run);
  CHECK(got.step == expected.step);
  CHECK_MESSAGE(got.model == expected.model,
                "final model.safetensors differs from the uninterrupted run");
  CHECK_MESSAGE(got.optimizer == expected.optimizer, "final optimizer.safetensors differs");
  CHECK(got.rng == expected.rng);
  CHECK_MESSAGE(got.metrics == expected.metrics, "metrics.jsonl (without timing) differs:\n"
                                                     << got.metrics << "\nexpected:\n"
                                                     << expected.metrics);
  CHECK_FALSE(has_partial_checkpoint(run));  // the finishing session cleaned the leftovers
}

TEST_CASE("train: crash full disk (RLIMIT_FSIZE) stops with an error and keeps the checkpoints") {
  TempDir tmp("full-disk");
  const fs::path run = tmp / "run";
  const RunResult first = train(run, false, {"--set", "train.steps=10"});
  REQUIRE_MESSAGE(first.exit_code == 0, first.describe());
  const Snapshot before = checkpoints_of(run);
  const uint64_t model_bytes = fs::file_size(run / "checkpoints" / "latest" / "model.safetensors");
  const uint64_t limit = model_bytes / 2;
  REQUIRE(fs::file_size(run / "metrics.jsonl") < limit);  // the run gets as far as a save

  RunOptions small_files;
  small_files.file_size_limit = limit;
  const RunResult full = train(run, true, {"--set", "train.steps=20"}, small_files);
  INFO(full.describe());
  CHECK(full.signal == 0);
  CHECK(full.exit_code == 2);
  CHECK(last_line(full).rfind("headlab: error: ", 0) == 0);
  CHECK(last_line(full).find("File too large") != std::string::npos);
  CHECK(last_line(full).find("model.safetensors") != std::string::npos);
  // The failed save left nothing behind, and the earlier checkpoints are as they were.
  const std::string changed = snapshot_diff(before, checkpoints_of(run));
  CHECK_MESSAGE(changed.empty(), "checkpoints/ changed:\n" << changed);
  CHECK(check_latest_complete(run, 10, "after the full disk") == 10);

  // Space again: the run resumes from the kept checkpoint and finishes.
  const RunResult again = train(run, true, {"--set", "train.steps=20"});
  REQUIRE_MESSAGE(again.exit_code == 0, again.describe());
  CHECK(outcome(run).step == 20);
}

TEST_CASE("train: crash unwritable output directory is refused before training") {
  TempDir tmp("unwritable");
  const fs::path file = tmp / "file";
  write_bytes(file, "x");
  // Root ignores permissions, so the unwritable places are ones no one can create: under a
  // regular file, and in /proc.
  for (const fs::path& out : {file / "run", fs::path("/proc/self/headlab-run")}) {
    const RunResult r = train(out, false);
    INFO(r.describe());
    CHECK(r.exit_code == 2);
    CHECK(r.err_lines().size() == 1);
    CHECK(last_line(r).rfind("headlab: error: ", 0) == 0);
    CHECK(last_line(r).find(out.string()) != std::string::npos);
  }
  CHECK(read_bytes(file) == "x");
}

TEST_CASE("train: crash NaN loss stops with exit 3 and keeps the last good checkpoint") {
  TempDir tmp("nan");
  const std::vector<std::string> explode = {"--set", "optim.lr=1e30", "--set",
                                            "schedule.name=\"constant\""};
  SUBCASE("a fresh run checkpointing every step") {
    const fs::path run = tmp / "fresh";
    std::vector<std::string> args = explode;
    args.insert(args.end(), {"--set", "train.checkpoint_every=1"});
    const RunResult r = train(run, false, args);
    INFO(r.describe());
    CHECK(r.exit_code == 3);
    CHECK(r.signal == 0);
    const std::string line = last_line(r);
    CHECK(line.rfind("headlab: error: train: training stopped at step ", 0) == 0);
    CHECK((line.find("NaN") != std::string::npos || line.find("Inf") != std::string::npos));
    // The checkpoint of the step before is complete and finite.
    const int64_t step = check_latest_complete(run, -1, "after the NaN");
    REQUIRE(step >= 1);
    CHECK(line.find(fmt::format("step {}", step + 1)) != std::string::npos);
    const headlab::CheckpointData c = headlab::load_checkpoint(run);
    int64_t non_finite = 0;
    for (const auto& t : c.model)
      for (int64_t i = 0; i < t.tensor.numel(); ++i)
        non_finite += !std::isfinite(t.tensor.data()[i]);
    CHECK(non_finite == 0);
  }
  SUBCASE("a resumed run: the checkpoints before it are untouched") {
    // One step at lr = 1e30 leaves finite values (about 1e30); the resumed run's next loss
    // overflows. (Resuming with another lr is refused: it would be another run.)
    const fs::path run = tmp / "resumed";
    std::vector<std::string> first_args = explode;
    first_args.insert(first_args.end(), {"--set", "train.steps=1"});
    // The step's weights are finite, its evaluation is not: exit 3 with its checkpoint kept.
    const RunResult first = train(run, false, first_args);
    REQUIRE_MESSAGE(first.exit_code == 3, first.describe());
    CHECK(last_line(first).rfind("headlab: error: train: the evaluation loss is ", 0) == 0);
    CHECK(last_line(first).find(" at the end of training (step 1) (largest |w| = ") !=
          std::string::npos);
    REQUIRE(check_latest_complete(run, -1, "after the exploded step") == 1);
    // eval and analyze of the exploded checkpoint exit 3 too, one line each, nothing written.
    for (const char* command : {"eval", "analyze"}) {
      const RunResult e = run_cli({command, run.string()});
      INFO(command << ": " << e.describe());
      CHECK(e.exit_code == 3);
      CHECK(e.err_lines().size() == 1);
      CHECK(last_line(e).rfind(fmt::format("headlab: error: {}: the evaluation loss is ", command),
                               0) == 0);
      CHECK((last_line(e).find(" is NaN at ") != std::string::npos ||
             last_line(e).find(" is Inf at ") != std::string::npos));
      CHECK(last_line(e).find("largest |w| = ") != std::string::npos);
      CHECK_FALSE(fs::exists(run / "heads.json"));
    }
    const Snapshot before = checkpoints_of(run);
    std::vector<std::string> args = explode;
    args.insert(args.end(), {"--set", "train.steps=20"});
    const RunResult r = train(run, true, args);
    INFO(r.describe());
    CHECK(r.exit_code == 3);
    CHECK(last_line(r).rfind("headlab: error: train: training stopped at step ", 0) == 0);
    CHECK(last_line(r).find("the last checkpoint (step 1) is untouched") != std::string::npos);
    const std::string changed = snapshot_diff(before, checkpoints_of(run));
    CHECK_MESSAGE(changed.empty(), "checkpoints/ changed:\n" << changed);
  }
}
