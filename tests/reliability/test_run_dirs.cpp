// Run directories as a hostile user leaves them (tests/hostile/runs/cases.txt: foreign files,
// non-regular files, changed configs, outputs that cannot be written), flipped bytes in every
// file of a checkpoint, and a full disk at every kind of write. Each case checks the exit code,
// the one error line, and that nothing outside what headlab owns changed (fingerprints).

#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tests/reliability/cases.h"
#include "tests/reliability/process.h"
#include "tests/reliability/run_dir.h"

using namespace headlab::testing;
namespace fs = std::filesystem;

namespace {

const fs::path kHostile = source_dir() / "tests" / "hostile";
const fs::path kConfig = kHostile / "runs" / "run.toml";

// The good run, another run of the same config with another seed, and a sweep of it.
struct Bases {
  TempDir tmp{"run-dirs-bases"};
  fs::path run = tmp / "run", other = tmp / "other", sweep = tmp / "sweep";
};

const Bases& bases() {
  static const Bases* b = [] {
    auto* out = new Bases;
    const RunResult r = run_cli({"train", kConfig.string(), "--out", out->run.string(), "--quiet"});
    REQUIRE_MESSAGE(r.exit_code == 0, r.describe());
    const RunResult o = run_cli({"train", kConfig.string(), "--out", out->other.string(), "--quiet",
                                 "--no-analysis", "--set", "train.seed=2"});
    REQUIRE_MESSAGE(o.exit_code == 0, o.describe());
    const RunResult s = run_cli({"sweep", kConfig.string(), "--over", "model.heads=2", "--out",
                                 out->sweep.string(), "--no-progress"});
    REQUIRE_MESSAGE(s.exit_code == 0, s.describe());
    return out;
  }();
  return *b;
}

// Every entry of `before` at or under one of `paths` (relative to its root) is unchanged.
std::string user_paths_changed(const Snapshot& before, const Snapshot& after,
                               const std::vector<std::string>& paths) {
  std::string out;
  for (const auto& [key, value] : before)
    for (const std::string& p : paths)
      if (key == p || key.rfind(p + "/", 0) == 0) {
        auto it = after.find(key);
        if (it == after.end() || it->second != value) out += "~ " + key + "\n";
      }
  return out;
}

struct Case {
  std::string cls, name, base, ops, command, exit, fragment;
};

// Prepares {dir} under `root`; returns the paths the operations touched (relative to root).
std::vector<std::string> prepare(const Case& c, const fs::path& root, const fs::path& dir) {
  const Bases& b = bases();
  if (c.base == "run") copy_tree(b.run, dir);
  if (c.base == "sweep") copy_tree(b.sweep, dir);
  if (c.base == "empty") fs::create_directories(dir);
  std::vector<std::string> touched;
  std::istringstream ops(c.ops);
  for (std::string op; std::getline(ops, op, ';');) {
    op = trim(op);
    if (op.empty()) continue;
    std::istringstream words(op);
    std::string verb, word, source;
    words >> verb >> word >> source;
    const fs::path target = resolve_path(dir, word);
    touched.push_back(target.lexically_relative(root).string());
    if (verb == "import") {
      fs::remove_all(target);
      copy_tree(b.other / source, target);
    } else {
      apply_operation(dir, kHostile, op);
    }
  }
  return touched;
}

// The command's arguments and where its outputs go.
std::vector<std::string> command_of(const Case& c, const fs::path& dir, RunOptions& options) {
  std::vector<std::string> words = split_args(
      c.command,
      {{"dir", dir.string()}, {"config", kConfig.string()}, {"other", bases().other.string()}});
  while (!words.empty() && (words[0][0] == '>' || words[0].rfind("2>", 0) == 0)) {
    const std::string w = words[0];
    if (w == ">pipe")
      options.stdout_closed_pipe = true;
    else if (w == "2>pipe")
      options.stderr_closed_pipe = true;
    else if (w[0] == '>')
      options.stdout_path = w.substr(1);
    else
      options.stderr_path = w.substr(2);
    words.erase(words.begin());
  }
  return words;
}

// What went wrong with case `c`, or "".
std::string run_case(const Case& c, const fs::path& root) {
  const fs::path dir = root / "dir";
  const std::vector<std::string> touched = prepare(c, root, dir);
  RunOptions options;
  options.timeout_seconds = kCaseTimeout;
  const std::vector<std::string> args = command_of(c, dir, options);
  const Snapshot before = snapshot(root), other_before = snapshot(bases().other);
  const RunResult r = run_cli(args, options);
  show(c.name, r);
  const Snapshot after = snapshot(root);
  const bool captured_err = options.stderr_path.empty() && !options.stderr_closed_pipe;
  const bool captured_out = options.stdout_path.empty() && !options.stdout_closed_pipe;
  std::string problem;
  if (c.exit == "2") {
    problem = captured_err ? check_rejected(r, c.fragment, captured_out) : check_ended(r);
    if (problem.empty())
      problem = snapshot_diff(before, after).empty()
                    ? ""
                    : "changed files:\n" + snapshot_diff(before, after);
  } else {
    problem = check_ended(r);
    const int code = c.exit == "2+" ? 2 : 0;
    if (problem.empty() && r.exit_code != code)
      problem = fmt::format("exit code {}, expected {}", r.exit_code, code);
    const std::string text = r.out + r.err;
    if (problem.empty() && c.fragment != "-" && text.find(c.fragment) == std::string::npos)
      problem = "output lacks '" + c.fragment + "'";
    if (problem.empty() && code == 2 && captured_err && r.err_lines().size() != 1)
      problem = fmt::format("{} stderr lines, expected 1", r.err_lines().size());
    const std::string changed = user_paths_changed(before, after, touched);
    if (problem.empty() && !changed.empty()) problem = "changed the user's files:\n" + changed;
  }
  if (problem.empty() && snapshot(bases().other) != other_before)
    problem = "changed another run directory";
  return problem.empty() ? "" : problem + "\n" + r.describe();
}

}  // namespace

TEST_CASE("train: run dirs foreign, non-regular, changed-config and output cases") {
  const auto lines = case_lines(kHostile / "runs" / "cases.txt");
  REQUIRE(lines.size() >= 100);
  TempDir tmp("run-dirs");
  std::map<std::string, int> per_class;
  int index = 0;
  for (const std::string& line : lines) {
    const auto f = fields(line);
    REQUIRE_MESSAGE(f.size() == 7, "malformed case line: " << line);
    const Case c{f[0], f[1], f[2], f[3], f[4], f[5], f[6]};
    const fs::path root = tmp / ("case-" + std::to_string(index++));
    fs::create_directories(root);
    const std::string problem = run_case(c, root);
    CHECK_MESSAGE(problem.empty(), c.cls << " " << c.name << ": " << problem);
    ++per_class[c.cls];
    std::error_code ignored;
    fs::remove_all(root, ignored);
  }
  std::string counts;
  for (const auto& [cls, n] : per_class) counts += fmt::format("{} {}, ", cls, n);
  MESSAGE(lines.size() << " run-directory cases: " << counts);
}

// The analysis files of two checkpoints of one run, mixed: `analyze --report-only` refuses the
// mix with one line naming the files' steps and ids and changes nothing; a plain `analyze`
// writes them again as one set, which the report then takes.
TEST_CASE("train: run dirs analysis files of two checkpoints, mixed, are refused and redone") {
  TempDir tmp("run-dirs-analysis");
  const fs::path base = tmp / "base";
  copy_tree(bases().run, base);
  const RunResult earlier = run_cli({"analyze", base.string(), "--checkpoint", "step-000004"});
  REQUIRE_MESSAGE(earlier.exit_code == 0, earlier.describe());
  const fs::path at4 = base / "analysis" / "step-000004";
  const auto set_of = [](const fs::path& file) {
    return nlohmann::json::parse(read_bytes(file)).at("analysis");
  };
  CHECK(set_of(base / "heads.json").at("step") == 6);
  CHECK(set_of(at4 / "heads.json").at("step") == 4);
  CHECK(set_of(at4 / "attention_tokens.json").at("id") == set_of(at4 / "heads.json").at("id"));
  const std::pair<const char*, std::string> mixes[] = {
      {"heads.json", "heads.json is of step 4, analysis "},
      {"attention_tokens.json", "attention_tokens.json of step 4, analysis "},
      {"attention.npy",
       "attention.npy is not the one heads.json and attention_tokens.json (step 6"}};
  int index = 0;
  for (const auto& [file, fragment] : mixes) {
    const fs::path run = tmp / ("mixed-" + std::to_string(index++));
    copy_tree(base, run);
    fs::copy_file(at4 / file, run / file, fs::copy_options::overwrite_existing);
    const Snapshot before = snapshot(run);
    const RunResult r = run_cli({"analyze", "--report-only", run.string()});
    CHECK_MESSAGE(check_rejected(r, fragment) == "", file << ": " << check_rejected(r, fragment)
                                                          << "\n"
                                                          << r.describe());
    CHECK_MESSAGE(snapshot_diff(before, snapshot(run)) == "", file);
    // The earlier checkpoint's report is as mixed when it gets the latest's file.
    fs::copy_file(base / file, run / "analysis" / "step-000004" / file,
                  fs::copy_options::overwrite_existing);
    const RunResult r4 =
        run_cli({"analyze", "--report-only", run.string(), "--checkpoint", "step-000004"});
    CHECK_MESSAGE(check_rejected(r4, "are of two analyses") == "", file << ": " << r4.describe());
    const RunResult redo = run_cli({"analyze", run.string()});
    CHECK_MESSAGE(redo.exit_code == 0, redo.describe());
    CHECK(set_of(run / "attention_tokens.json") == set_of(base / "attention_tokens.json"));
    CHECK(set_of(run / "heads.json").at("id") == set_of(base / "heads.json").at("id"));
    const RunResult report = run_cli({"analyze", "--report-only", run.string()});
    CHECK_MESSAGE(report.exit_code == 0, report.describe());
    CHECK(read_bytes(run / "report.html")
              .find("Analysis files: step 6, analysis " +
                    set_of(run / "heads.json").at("id").get<std::string>()) != std::string::npos);
  }
}

// One bit flipped at offsets drawn from a fixed seed, in each file of the latest checkpoint:
// every flip is found (a checksum, or the format around it) with one line naming the file.
TEST_CASE("train: run dirs flipped bytes in every checkpoint file are refused, naming the file") {
  const Bases& b = bases();
  TempDir tmp("run-dirs-flips");
  const fs::path latest = fs::read_symlink(b.run / "checkpoints" / "latest");
  std::mt19937_64 rng(20240607);
  int cases = 0;
  for (const char* file :
       {"model.safetensors", "optimizer.safetensors", "state.json", "config.resolved.toml"}) {
    const std::string good = read_bytes(b.run / "checkpoints" / latest / file);
    for (int k = 0; k < 10; ++k) {
      // The first two flips land in the safetensors header (or the start of the text).
      const uint64_t span = k < 2 ? std::min<uint64_t>(good.size(), 200) : good.size();
      const size_t offset = std::uniform_int_distribution<uint64_t>(0, span - 1)(rng);
      const int bit = static_cast<int>(rng() % 8);
      const fs::path run = tmp / fmt::format("flip-{}", cases++);
      copy_tree(b.run, run);
      std::string bytes = good;
      bytes[offset] = static_cast<char>(bytes[offset] ^ (1 << bit));
      write_bytes(run / "checkpoints" / latest / file, bytes);
      const bool resume = k % 3 == 0;
      const std::vector<std::string> args =
          resume ? std::vector<std::string>{"train",    kConfig.string(), "--out", run.string(),
                                            "--resume", "--quiet",        "--set", "train.steps=8"}
                 : std::vector<std::string>{"eval", run.string()};
      const Snapshot before = snapshot(run);
      RunOptions o;
      o.timeout_seconds = kCaseTimeout;
      const RunResult r = run_cli(args, o);
      const std::string what = fmt::format("{} byte {} bit {} ({})", file, offset, bit, args[0]);
      show(what, r);
      CHECK_MESSAGE(check_rejected(r, file) == "", what << ": " << check_rejected(r, file) << "\n"
                                                        << r.describe());
      CHECK_MESSAGE(snapshot_diff(before, snapshot(run)).empty(), what << " changed files");
      fs::remove_all(run);
    }
  }
  // The example: 4 KB of zeros inside the weights.
  const fs::path run = tmp / "zeros";
  copy_tree(b.run, run);
  const fs::path model = run / "checkpoints" / latest / "model.safetensors";
  std::string bytes = read_bytes(model);
  REQUIRE(bytes.size() > 8192);
  std::fill(bytes.end() - 4096 - 512, bytes.end() - 512, '\0');
  write_bytes(model, bytes);
  const RunResult r = run_cli({"eval", run.string()});
  CHECK_MESSAGE(check_rejected(r, "fails its checksum") == "", r.describe());
  MESSAGE((cases + 1) << " flipped-bytes cases");
}

// A file-size limit (RLIMIT_FSIZE with SIGXFSZ ignored: writes fail with EFBIG, as on a full
// disk) at sizes that hit each kind of write of a resumed run: the run.json and metrics rewrite,
// train.log, a checkpoint's tensors, the analysis. The run stops with one error line naming the
// file, the checkpoints it had stay complete, and without the limit it resumes to the end.
TEST_CASE("train: run dirs a full disk at any write stops cleanly and the run resumes") {
  const Bases& b = bases();
  TempDir tmp("run-dirs-full");
  const fs::path latest = fs::read_symlink(b.run / "checkpoints" / "latest");
  const uint64_t model = fs::file_size(b.run / "checkpoints" / latest / "model.safetensors");
  int cases = 0;
  // (The error line itself goes to a file under the same limit: 400 bytes is the smallest that
  // holds it.)
  for (const uint64_t limit :
       {uint64_t{400}, uint64_t{1400}, uint64_t{2000}, model / 2, model + 64, uint64_t{60000}}) {
    const fs::path run = tmp / fmt::format("full-{}", cases++);
    copy_tree(b.run, run);
    const Snapshot kept = snapshot(run / "checkpoints");
    RunOptions o;
    o.file_size_limit = limit;
    o.timeout_seconds = kCaseTimeout;
    const std::vector<std::string> resume = {"train",      kConfig.string(), "--out",
                                             run.string(), "--resume",       "--quiet",
                                             "--set",      "train.steps=12"};
    const RunResult r = run_cli(resume, o);
    INFO("limit " << limit << ": " << r.describe());
    CHECK(check_ended(r) == "");
    if (r.exit_code != 0) {
      CHECK(r.exit_code == 2);
      REQUIRE(r.err_lines().size() == 1);
      CHECK(r.err_lines()[0].rfind("headlab: error: train: ", 0) == 0);
      CHECK(r.err_lines()[0].find("File too large") != std::string::npos);
      CHECK(r.err_lines()[0].find(run.string()) != std::string::npos);
    }
    // Whatever it got to, `latest` names a complete checkpoint (eval verifies every byte), and
    // one that failed before saving anything left the checkpoints as they were.
    const RunResult check = run_cli({"eval", run.string(), "--json"});
    CHECK_MESSAGE(check.exit_code == 0, check.describe());
    if (r.exit_code != 0 && check.out.find("\"step\":6") != std::string::npos)
      CHECK(snapshot_diff(kept, snapshot(run / "checkpoints")) == "");
    const RunResult again = run_cli(resume);
    CHECK_MESSAGE(again.exit_code == 0, again.describe());
    CHECK(fs::read_symlink(run / "checkpoints" / "latest") == "step-000012");
    const RunResult e = run_cli({"eval", run.string(), "--json"});
    CHECK_MESSAGE(e.exit_code == 0, e.describe());
  }
  MESSAGE(cases << " full-disk cases");
}
