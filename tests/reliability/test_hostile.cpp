// Every hostile input of tests/hostile through the CLI: config files (config/*.toml, each with
// "# expect: <fragment>" on its first line), command lines (cases.txt) and corrupted
// checkpoints (checkpoint/cases.txt). Each must end with exit code 2 and exactly one stderr
// line "headlab: error: ..." containing the expected fragment: no signal, no hang, nothing on
// stdout, and nothing created or changed on disk.

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/reliability/cases.h"
#include "tests/reliability/process.h"
#include "tests/reliability/run_dir.h"

using namespace headlab::testing;
namespace fs = std::filesystem;

namespace {

const fs::path kHostile = source_dir() / "tests" / "hostile";
constexpr double kTimeout = kCaseTimeout;

RunOptions timeout(double seconds) {
  RunOptions o;
  o.timeout_seconds = seconds;
  return o;
}

}  // namespace

TEST_CASE("train: hostile configs") {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(kHostile / "config"))
    if (e.path().extension() == ".toml") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  REQUIRE(files.size() >= 100);
  TempDir tmp("hostile-config");
  int passed = 0;
  for (const fs::path& file : files) {
    std::istringstream in(read_bytes(file));
    std::string first, second;
    std::getline(in, first);
    std::getline(in, second);
    const std::string tag = "# expect: ";
    REQUIRE_MESSAGE(first.rfind(tag, 0) == 0, file.string() << " has no '# expect:' first line");
    const std::string fragment = trim(first.substr(tag.size()));
    const fs::path out = tmp / file.stem().string();
    std::vector<std::string> args = {"train", file.string(), "--out", out.string()};
    if (second.rfind("# args: ", 0) == 0)
      for (const auto& a : split_args(second.substr(8), {})) args.push_back(a);
    const RunResult r = run_cli(args, timeout(kTimeout));
    const std::string problem = check_rejected(r, fragment);
    show(file.filename().string(), r);
    CHECK_MESSAGE(problem.empty(), file.filename().string() << ": " << problem << "\n"
                                                            << r.describe());
    CHECK_MESSAGE(!fs::exists(fs::symlink_status(out)),
                  file.filename().string() << ": created the run directory " << out);
    passed += problem.empty();
  }
  MESSAGE(passed << " of " << files.size() << " hostile configs rejected as promised");
}

TEST_CASE("train: hostile command lines") {
  const auto lines = case_lines(kHostile / "cases.txt");
  REQUIRE(lines.size() >= 30);
  TempDir tmp("hostile-cli");
  const fs::path file = tmp / "regular-file", dir = tmp / "empty-dir";
  write_bytes(file, "not a directory\n");
  fs::create_directories(dir);
  // Impossible paths (none of them exists): a 300-byte file name (NAME_MAX is 255), a path of
  // short names 4,040 bytes long (under PATH_MAX, but not with a run's files below it) and one
  // of 5,000 bytes.
  const std::string long_name(300, 'n');
  // Exactly 4,040 and 5,000 bytes, whatever the temporary directory's name.
  auto path_of = [&](size_t bytes) {
    std::string p = tmp.path().string();
    while (p.size() + 10 < bytes) p += "/abcdefgh";
    return p + "/" + std::string(bytes - p.size() - 1, 'x');
  };
  const std::string deep = path_of(4040), too_long = path_of(5000);
  int index = 0;
  for (const std::string& line : lines) {
    const auto f = fields(line);
    REQUIRE_MESSAGE(f.size() == 2, "malformed case line: " << line);
    const fs::path out = tmp / ("out-" + std::to_string(index));
    const fs::path missing = tmp / ("missing-" + std::to_string(index++));
    const auto args = split_args(f[1], {{"out", out.string()},
                                        {"file", file.string()},
                                        {"dir", dir.string()},
                                        {"missing", missing.string()},
                                        {"tiny", "configs/tiny.toml"},
                                        {"long_name", long_name},
                                        {"deep", deep},
                                        {"too_long", too_long},
                                        {"plugins", HEADLAB_TEST_PLUGIN_DIR}});
    const auto before = snapshot(tmp.path());
    const RunResult r = run_cli(args, timeout(kTimeout));
    const std::string problem = check_rejected(r, f[0]);
    show(f[1], r);
    CHECK_MESSAGE(problem.empty(), line << ": " << problem << "\n" << r.describe());
    const std::string changed = snapshot_diff(before, snapshot(tmp.path()));
    CHECK_MESSAGE(changed.empty(), line << ": changed the file system:\n" << changed);
  }
}

TEST_CASE("train: hostile checkpoints") {
  const fs::path cases = kHostile / "checkpoint" / "cases.txt";
  const fs::path config = kHostile / "checkpoint" / "run.toml";
  const auto lines = case_lines(cases);
  REQUIRE(lines.size() >= 30);
  TempDir tmp("hostile-checkpoint");
  const fs::path good = tmp / "good";
  const RunResult trained =
      run_cli({"train", config.string(), "--out", good.string(), "--no-progress", "--no-analysis"});
  REQUIRE_MESSAGE(trained.exit_code == 0, trained.describe());
  REQUIRE(fs::read_symlink(good / "checkpoints" / "latest") == "step-000004");

  int index = 0, runs = 0;
  for (const std::string& line : lines) {
    const auto f = fields(line);
    REQUIRE_MESSAGE(f.size() == 4, "malformed case line: " << line);
    const std::string& name = f[0];
    const fs::path run = tmp / ("case-" + std::to_string(index++));
    copy_tree(good, run);
    std::istringstream ops(f[2]);
    for (std::string op; std::getline(ops, op, ';');) {
      op = trim(op);
      if (op.empty()) continue;
      try {
        apply_operation(run, kHostile, op);
      } catch (const std::exception& e) {
        FAIL(name << ": " << e.what());
      }
    }
    const auto command = split_args(f[1], {});
    REQUIRE(!command.empty());
    std::vector<std::vector<std::string>> invocations;
    const std::vector<std::string> extra(command.begin() + 1, command.end());
    if (command[0] == "resume" || command[0] == "both") {
      std::vector<std::string> a = {"train",      config.string(), "--resume",     "--out",
                                    run.string(), "--no-progress", "--no-analysis"};
      a.insert(a.end(), extra.begin(), extra.end());
      invocations.push_back(a);
    }
    if (command[0] == "eval" || command[0] == "both") {
      std::vector<std::string> a = {"eval", run.string()};
      a.insert(a.end(), extra.begin(), extra.end());
      invocations.push_back(a);
    }
    REQUIRE_MESSAGE(!invocations.empty(), name << ": unknown command " << command[0]);
    for (const auto& args : invocations) {
      const Snapshot before = snapshot(run);
      const RunResult r = run_cli(args, timeout(kTimeout));
      ++runs;
      const std::string problem = check_rejected(r, f[3]);
      show(name + " (" + args[0] + ")", r);
      CHECK_MESSAGE(problem.empty(), name << " (" << args[0] << "): " << problem << "\n"
                                          << r.describe());
      const std::string changed = snapshot_diff(before, snapshot(run));
      CHECK_MESSAGE(changed.empty(), name << " (" << args[0] << ") changed the run directory:\n"
                                          << changed);
    }
    std::error_code ignored;
    fs::remove_all(run, ignored);
  }
  MESSAGE(lines.size() << " hostile checkpoints, " << runs << " runs of the CLI");
}
