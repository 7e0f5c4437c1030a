// The built CLI (HEADLAB_CLI): exit codes 0 / 2 / 3, every user mistake reported as one
// "headlab: error: ..." line and nothing else on stderr, --help listing every option, and
// train -> eval -> resume through the command line.

#include <doctest/doctest.h>

#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/version.h"

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    static int counter = 0;
    path = fs::temp_directory_path() / fmt::format("headlab-cli-{}-{}", ::getpid(), counter++);
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
};

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) out.push_back(line);
  return out;
}

std::vector<std::string> entries_of(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

struct Result {
  int code = -1;
  std::string out, err;
};

// Runs `headlab <args>` in `cwd` with stdin closed; stdout and stderr captured.
Result headlab(const std::string& args, const fs::path& cwd) {
  const fs::path out = cwd / ".stdout", err = cwd / ".stderr";
  const std::string cmd = fmt::format("cd '{}' && '{}' {} >'{}' 2>'{}' </dev/null", cwd.string(),
                                      HEADLAB_CLI, args, out.string(), err.string());
  const int status = std::system(cmd.c_str());
  Result r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = read_text(out);
  r.err = read_text(err);
  return r;
}

const std::string kTiny = std::string(HEADLAB_SOURCE_DIR) + "/configs/tiny.toml";
// A few seconds at most: tiny.toml cut short, no analysis.
const std::string kQuick =
    "--no-analysis --set train.steps=24 --set schedule.warmup_steps=4 --set train.eval_every=12 "
    "--set train.checkpoint_every=12";

// Exit 2, nothing on stdout, exactly one stderr line: "headlab: error: ...".
void check_user_error(const Result& r, const std::string& args, const std::string& part) {
  INFO("headlab ", args, "\nstderr: ", r.err, "\nstdout: ", r.out);
  CHECK(r.code == 2);
  CHECK(r.out.empty());
  const std::vector<std::string> err = lines(r.err);
  REQUIRE(err.size() == 1);
  CHECK(err[0].rfind("headlab: error: ", 0) == 0);
  CHECK(err[0].find(part) != std::string::npos);
}

}  // namespace

TEST_CASE("train: cli user mistakes exit 2 with one error line and nothing else") {
  TempDir dir;
  const fs::path& d = dir.path;
  // A finished run to resume, evaluate and corrupt.
  const Result ok = headlab(fmt::format("train '{}' --out run {}", kTiny, kQuick), d);
  REQUIRE_MESSAGE(ok.code == 0, ok.err);
  fs::create_directories(d / "empty");
  std::ofstream(d / "bad.toml") << "[task]\nname = \"dependency\"\n[model]\nhaeds = 4\n";
  std::ofstream(d / "syntax.toml") << "[task\nname = 1\n";

  struct Case {
    std::string args, part;
  };
  const std::vector<Case> cases = {
      {"train", "CONFIG is required"},
      {"frobnicate", "frobnicate"},
      {"train missing.toml", "missing.toml: cannot read the config file"},
      {"train empty", "empty: is a directory"},
      {fmt::format("train '{}' --bogus", kTiny), "--bogus"},
      {"train bad.toml", "bad.toml:4:1: unknown key model.haeds (did you mean model.heads?)"},
      {"train syntax.toml", "syntax.toml:1:"},
      {fmt::format("train '{}' --set model.heads=5", kTiny),
       "--set model.heads=5: model.heads = 5 does not divide model.d_model = 64"},
      {fmt::format("train '{}' --set model.heads", kTiny), "expected key=value"},
      {fmt::format("train '{}' --set optim.lr=nan", kTiny),
       "optim.lr = nan is not a finite number"},
      {fmt::format("train '{}' --set train.batch_size=65536 --set model.d_model=4096", kTiny),
       "estimated memory"},
      {fmt::format("train '{}' --out run", kTiny), "already holds a run"},
      {fmt::format("train '{}' --out empty --resume", kTiny),
       "train: 'empty' is not a run directory of headlab"},
      {fmt::format("train '{}' --out run --resume --set model.heads=8", kTiny),
       "model.heads: 4 (checkpoint) vs 8 (config)"},
      {"eval nowhere", "'nowhere' is not a directory"},
      {"eval empty", "eval: 'empty' is not a run directory of headlab"},
      {"eval run --set model.heads=8", "eval: cannot evaluate"},
      {"eval run --set model.heads=8", "model.heads: 4 (checkpoint) vs 8 (config)"},
      {"eval run --set train.eval_seed=-1", "train.eval_seed = -1 is out of range"},
  };
  for (const Case& c : cases) check_user_error(headlab(c.args, d), c.args, c.part);

  // A damaged checkpoint is a user mistake too, named by its file.
  const fs::path model = d / "run" / "checkpoints" / "step-000024" / "model.safetensors";
  REQUIRE(fs::exists(model));
  fs::resize_file(model, fs::file_size(model) / 2);
  check_user_error(headlab("eval run", d), "eval run (truncated)", "model.safetensors");
  check_user_error(headlab(fmt::format("train '{}' --out run --resume", kTiny), d),
                   "train --resume (truncated)", "model.safetensors");
}

TEST_CASE("train: cli train, eval and resume, the summary goes to stdout") {
  TempDir dir;
  const fs::path& d = dir.path;
  fs::copy_file(kTiny, d / "mini.toml");
  const Result r = headlab("train mini.toml --no-progress " + kQuick, d);
  REQUIRE_MESSAGE(r.code == 0, r.err);
  const fs::path run = d / "runs" / "mini";  // the default --out
  REQUIRE(fs::exists(run / "summary.json"));
  const json summary = json::parse(read_text(run / "summary.json"));
  CHECK(r.out.find("eval accuracy: ") != std::string::npos);
  CHECK(r.out.find(fmt::format("eval accuracy: {:.4f}", summary["eval_accuracy"].get<double>())) !=
        std::string::npos);
  CHECK(r.out.find("steps to 95%") != std::string::npos);
  CHECK(r.err.find("step 24/24") != std::string::npos);  // plain log lines on stderr
  CHECK(r.err.find("headlab: error") == std::string::npos);

  // eval: the same sentences give the same accuracy as the run's final evaluation.
  const Result e = headlab("eval runs/mini --json", d);
  REQUIRE_MESSAGE(e.code == 0, e.err);
  const json ej = json::parse(e.out);
  CHECK(ej["accuracy"].get<double>() == summary["eval_accuracy"].get<double>());
  CHECK(ej["step"] == 24);
  const Result fresh = headlab("eval runs/mini --json --set train.eval_seed=99", d);
  REQUIRE(fresh.code == 0);
  CHECK(json::parse(fresh.out)["eval_seed"] == 99);

  // Resume with more steps continues from the last checkpoint.
  const Result more = headlab(
      "train mini.toml --no-progress --resume --out runs/mini " + kQuick + " --set train.steps=36",
      d);
  REQUIRE_MESSAGE(more.code == 0, more.err);
  CHECK(more.err.find("resuming at step 24 of 36") != std::string::npos);
  CHECK(json::parse(read_text(run / "summary.json"))["steps"] == 36);
}

TEST_CASE("train: cli non-finite loss exits 3 naming the step, the last checkpoint is intact") {
  TempDir dir;
  const fs::path& d = dir.path;
  // One step at lr = 1e30 leaves finite values (about 1e30), whose evaluation is already not
  // finite (exit 3, the step's checkpoint kept); the next loss overflows.
  const std::string huge = "--set optim.lr=1e30 --set schedule.name=constant";
  REQUIRE(
      headlab(fmt::format("train '{}' --out run {} {} --set train.steps=1", kTiny, kQuick, huge), d)
          .code == 3);
  const fs::path ckpt = d / "run" / "checkpoints" / "step-000001";
  const std::string before = read_text(ckpt / "model.safetensors");
  const Result r = headlab(fmt::format("train '{}' --out run --resume {} {} --set train.steps=60 "
                                       "--set train.checkpoint_every=1000",
                                       kTiny, kQuick, huge),
                           d);
  INFO("stderr: ", r.err);
  CHECK(r.code == 3);
  const std::vector<std::string> err = lines(r.err);
  REQUIRE_FALSE(err.empty());
  CHECK(err.back().rfind("headlab: error: train: training stopped at step ", 0) == 0);
  CHECK(err.back().find("last checkpoint (step 1) is untouched") != std::string::npos);
  CHECK(fs::read_symlink(d / "run" / "checkpoints" / "latest") == "step-000001");
  CHECK(read_text(ckpt / "model.safetensors") == before);
}

TEST_CASE("train: cli --help of train and eval lists every option") {
  TempDir dir;
  const Result t = headlab("train --help", dir.path);
  CHECK(t.code == 0);
  for (const char* option :
       {"CONFIG", "--set", "--out", "--resume", "--no-progress", "--no-analysis", "--help"})
    CHECK_MESSAGE(t.out.find(option) != std::string::npos, option);
  const Result e = headlab("eval --help", dir.path);
  CHECK(e.code == 0);
  for (const char* option : {"RUN_DIR", "--set", "--json", "--help"})
    CHECK_MESSAGE(e.out.find(option) != std::string::npos, option);
  const Result top = headlab("--help", dir.path);
  CHECK(top.code == 0);
  for (const char* command : {"train", "eval", "info"})
    CHECK_MESSAGE(top.out.find(command) != std::string::npos, command);
}

TEST_CASE("train: cli without arguments prints every command and the exit codes, exit 2") {
  TempDir dir;
  const Result r = headlab("", dir.path);
  CHECK(r.code == 2);
  CHECK(r.out.empty());
  for (const char* command : {"train", "eval", "info", "bench", "gradcheck", "analyze", "sweep"})
    CHECK_MESSAGE(r.err.find(fmt::format("\n  {} ", command)) != std::string::npos, command);
  CHECK(r.err.find("Exit codes: 0 done; 2 ") != std::string::npos);
  for (const char* args : {"--help", "train --help", "eval --help", "sweep --help"}) {
    const Result h = headlab(args, dir.path);
    CHECK(h.code == 0);
    CHECK_MESSAGE(h.out.find("128 + N stopped by signal N") != std::string::npos, args);
  }
}

// OMP_DISPLAY_ENV=verbose makes libgomp print the policy it runs with (its spin count: 0 when
// passive) as it starts, so this reads what libgomp took, not what the environment says.
TEST_CASE(
    "train: cli chooses OpenMP's wait policy (a short spin on idle CPUs, else passive) unless the "
    "user chose one") {
  TempDir dir;
  auto run_info = [&dir](const std::string& env, const std::string& prefix = "") {
    const fs::path out = dir.path / "out", err = dir.path / "err";
    const std::string cmd = fmt::format(
        "env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT -u HEADLAB_OPENMP_WAIT {} "
        "OMP_DISPLAY_ENV=verbose "
        "{} '{}' info >'{}' 2>'{}' </dev/null",
        env, prefix, HEADLAB_CLI, out.string(), err.string());
    REQUIRE(std::system(cmd.c_str()) == 0);
    return std::pair(read_text(out), read_text(err));
  };
  const std::string spin = "5000";  // core/openmp_wait.h: kQuietSpinCount
  // The CPUs this test may run on (a cpuset need not start at 0).
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  REQUIRE(sched_getaffinity(0, sizeof set, &set) == 0);
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  // Whatever it chose, libgomp runs with what `info` says.
  const auto [chosen_out, chosen_err] = run_info("");
  if (chosen_out.find("openmp wait policy: GOMP_SPINCOUNT=" + spin +
                      " (headlab's choice: the CPUs were idle") != std::string::npos) {
    CHECK(chosen_err.find("GOMP_SPINCOUNT = '" + spin + "'") != std::string::npos);
  } else {
    CHECK(chosen_out.find("openmp wait policy: OMP_WAIT_POLICY=passive (headlab's choice: ") !=
          std::string::npos);
    CHECK(chosen_err.find("GOMP_SPINCOUNT = '0'") != std::string::npos);
  }
  // One CPU: passive, and so is a choice inherited from a headlab process that looked before.
  for (const char* env :
       {"", "HEADLAB_OPENMP_WAIT='1 GOMP_SPINCOUNT=1000; idle' GOMP_SPINCOUNT=1000"}) {
    const auto [one_out, one_err] = run_info(env, fmt::format("taskset -c {}", cpus.at(0)));
    CHECK_MESSAGE(one_out.find("openmp wait policy: OMP_WAIT_POLICY=passive (headlab's choice: one "
                               "CPU") != std::string::npos,
                  env);
    CHECK_MESSAGE(one_err.find("GOMP_SPINCOUNT = '0'") != std::string::npos, env);
  }
  // Both CPUs it may run on busy (a `yes` pinned to each): passive.
  if (cpus.size() >= 2) {
    // The busy processes end however the check below ends (a failed REQUIRE throws).
    struct Busy {
      std::string pids;
      ~Busy() { std::system(fmt::format("kill $(cat '{}') 2>/dev/null", pids).c_str()); }
    } busy{(dir.path / "pids").string()};
    REQUIRE(std::system(fmt::format("(taskset -c {1} yes >/dev/null & echo $! >>'{0}'; taskset -c "
                                    "{2} yes >/dev/null & echo $! >>'{0}')",
                                    busy.pids, cpus[0], cpus[1])
                            .c_str()) == 0);
    const auto [busy_out, busy_err] =
        run_info("", fmt::format("taskset -c {},{}", cpus[0], cpus[1]));
    CHECK(busy_out.find("openmp wait policy: OMP_WAIT_POLICY=passive (headlab's choice: other "
                        "work on the CPUs at start") != std::string::npos);
    CHECK(busy_err.find("GOMP_SPINCOUNT = '0'") != std::string::npos);
  }
  // The user's policy is kept.
  const auto [active_out, active_err] = run_info("OMP_WAIT_POLICY=active");
  CHECK(active_out.find("openmp wait policy: active\n") != std::string::npos);
  CHECK(active_err.find("OMP_WAIT_POLICY = 'ACTIVE'") != std::string::npos);
  const auto [spin_out, spin_err] = run_info("GOMP_SPINCOUNT=1234");
  CHECK(spin_out.find("openmp wait policy: GOMP_SPINCOUNT=1234\n") != std::string::npos);
  CHECK(spin_err.find("GOMP_SPINCOUNT = '1234'") != std::string::npos);
  CHECK(spin_err.find("GOMP_SPINCOUNT = '0'") == std::string::npos);
}

TEST_CASE("train: cli --dry-run says what the run would be and creates nothing") {
  TempDir dir;
  const fs::path& d = dir.path;
  const Result r =
      headlab(fmt::format("train '{}' --out run --dry-run --set model.heads=8", kTiny), d);
  REQUIRE_MESSAGE(r.code == 0, r.err);
  CHECK(r.out.find("parameters: ") != std::string::npos);
  CHECK(r.out.find("estimated memory: ") != std::string::npos);
  CHECK(r.out.find("steps: 1 to ") != std::string::npos);
  CHECK(r.out.find("would write: a new run directory run") != std::string::npos);
  CHECK_FALSE(fs::exists(d / "run"));
  // Every file the run then writes is in the list (the marker and the lock aside).
  const Result real = headlab(fmt::format("train '{}' --out run --set model.heads=8", kTiny), d);
  REQUIRE_MESSAGE(real.code == 0, real.err);
  const std::string listed = r.out.substr(r.out.find("would write: "));
  for (const std::string& name : entries_of(d / "run"))
    if (name != ".headlab" && name != ".headlab.lock")
      CHECK_MESSAGE(listed.find(name) != std::string::npos, name << " is not in: " << listed);
  // A directory that could not receive the run is refused the same way as without --dry-run.
  fs::create_directories(d / "full");
  std::ofstream(d / "full" / "notes.txt") << "mine";
  const Result foreign = headlab(fmt::format("train '{}' --out full --dry-run", kTiny), d);
  check_user_error(foreign, "--dry-run into a foreign directory", "it holds 'notes.txt'");
  CHECK(entries_of(d / "full") == std::vector<std::string>{"notes.txt"});
}

TEST_CASE("train: cli a run that failed before its first checkpoint is retried with --overwrite") {
  TempDir dir;
  const fs::path& d = dir.path;
  const Result nan = headlab(fmt::format("train '{}' --out run {} --set optim.lr=1e30 --set "
                                         "schedule.name=constant --set train.checkpoint_every=1000",
                                         kTiny, kQuick),
                             d);
  CHECK(nan.code == 3);
  CHECK(nan.err.find("no checkpoint was written") != std::string::npos);
  check_user_error(headlab(fmt::format("train '{}' --out run {}", kTiny, kQuick), d), "again",
                   "already holds a run");
  check_user_error(headlab(fmt::format("train '{}' --out run --resume {}", kTiny, kQuick), d),
                   "resume", "start it again with --overwrite");
  std::ofstream(d / "run" / "notes.txt") << "mine";
  check_user_error(headlab(fmt::format("train '{}' --out run --overwrite {}", kTiny, kQuick), d),
                   "overwrite with a foreign file", "it holds 'notes.txt'");
  fs::remove(d / "run" / "notes.txt");
  const Result again =
      headlab(fmt::format("train '{}' --out run --overwrite {}", kTiny, kQuick), d);
  REQUIRE_MESSAGE(again.code == 0, again.err);
  CHECK(fs::read_symlink(d / "run" / "checkpoints" / "latest") == "step-000024");
  // A directory headlab did not create is never overwritten.
  fs::create_directories(d / "mine");
  std::ofstream(d / "mine" / "data.csv") << "1,2\n";
  check_user_error(headlab(fmt::format("train '{}' --out mine --overwrite {}", kTiny, kQuick), d),
                   "overwrite of a foreign directory", "headlab did not create it");
  CHECK(read_text(d / "mine" / "data.csv") == "1,2\n");
}

TEST_CASE("train: cli eval and analyze take --checkpoint and say which step they used") {
  TempDir dir;
  const fs::path& d = dir.path;
  const std::string quick =
      "--set train.steps=24 --set schedule.warmup_steps=4 --set "
      "train.eval_every=12 --set train.checkpoint_every=12";
  REQUIRE(headlab(fmt::format("train '{}' --out run {}", kTiny, quick), d).code == 0);
  const Result e = headlab("eval run --checkpoint step-000012 --json", d);
  REQUIRE_MESSAGE(e.code == 0, e.err);
  CHECK(json::parse(e.out)["step"] == 12);
  const Result path = headlab("eval run/checkpoints/step-000012", d);
  REQUIRE_MESSAGE(path.code == 0, path.err);
  CHECK(path.out.find("(step 12)") != std::string::npos);
  CHECK(json::parse(headlab("eval run --json", d).out)["step"] == 24);

  // An earlier checkpoint's analysis goes to analysis/step-NNNNNN/; the run's own files stay.
  const std::string heads = read_text(d / "run" / "heads.json");
  const std::string report = read_text(d / "run" / "report.html");
  const Result a = headlab("analyze run --checkpoint step-000012", d);
  REQUIRE_MESSAGE(a.code == 0, a.err);
  CHECK(a.out.find("(step 12)") != std::string::npos);
  for (const char* file : {"heads.json", "attention.npy", "attention_tokens.json", "report.html"})
    CHECK_MESSAGE(fs::exists(d / "run" / "analysis" / "step-000012" / file), file);
  CHECK(read_text(d / "run" / "heads.json") == heads);
  CHECK(read_text(d / "run" / "report.html") == report);
  // Its report reads the curves and the timeline from the run directory.
  const std::string early = read_text(d / "run" / "analysis" / "step-000012" / "report.html");
  CHECK(early.find("<section id=\"timeline\"") != std::string::npos);
  CHECK(early.find("timeline.jsonl not found") == std::string::npos);
  CHECK(early.find("<section id=\"curves\"") != std::string::npos);
  REQUIRE(headlab("analyze run --checkpoint step-000012 --report-only", d).code == 0);
  CHECK(read_text(d / "run" / "analysis" / "step-000012" / "report.html") == early);
  const Result latest = headlab("analyze run --checkpoint step-000024", d);
  REQUIRE_MESSAGE(latest.code == 0, latest.err);
  CHECK(latest.out.find("in run\n") != std::string::npos);  // the latest: the run's own files
}

TEST_CASE("train: cli a run records how it was made in run.json and what it printed in train.log") {
  TempDir dir;
  const fs::path& d = dir.path;
  const Result r = headlab(fmt::format("train '{}' --out run {} --set model.norm=post --set "
                                       "optim.betas=0.9,0.98",
                                       kTiny, kQuick),
                           d);
  REQUIRE_MESSAGE(r.code == 0, r.err);
  const json run = json::parse(read_text(d / "run" / "run.json"));
  CHECK(run["command"][1] == "train");
  CHECK(run["command"].size() == 18);  // headlab train CONFIG --out run + 14 more
  CHECK(run["cwd"] == fs::canonical(d).string());
  CHECK(run["headlab"]["version"] == HEADLAB_VERSION);
  CHECK(run["headlab"]["git_commit"].get<std::string>().size() >= 7);
  CHECK(run["headlab"]["build_type"].is_string());
  CHECK(run["backend"].is_string());
  for (const char* lib : {"onednn", "openblas", "openblas_core", "onednn_isa"})
    CHECK_MESSAGE(run["libraries"][lib].is_string(), lib);
  CHECK(run["cpu"]["hardware_threads"].get<int>() >= 1);
  CHECK(run["cpu"]["threads"] == 1);
  // The CLI chose a wait policy (unless the test's environment did): it is recorded.
  const std::string wait = run["cpu"]["openmp_wait"].get<std::string>();
  CHECK_MESSAGE((wait.rfind("OMP_WAIT_POLICY=", 0) == 0 || wait.rfind("GOMP_SPINCOUNT=", 0) == 0),
                wait);
  CHECK(run["start"].get<std::string>().back() == 'Z');
  CHECK(run["end"].is_string());
  CHECK(run["outcome"] == "finished");
  CHECK(run["sessions"].size() == 1);
  const json summary = json::parse(read_text(d / "run" / "summary.json"));
  CHECK(summary["run_json"] == "run.json");
  CHECK(summary["train_log"] == "train.log");
  const std::string log = read_text(d / "run" / "train.log");
  CHECK(log.find("step 24/24") != std::string::npos);
  CHECK(log.find("eval accuracy: ") != std::string::npos);  // the summary too
  CHECK(log.find("--set model.norm=post") != std::string::npos);
  const std::string config = read_text(d / "run" / "config.resolved.toml");
  CHECK(config.find("# override: --set model.norm=post\n") != std::string::npos);
  CHECK(config.find("norm = \"post\"") != std::string::npos);
  // A second session is a second entry, and the log goes on.
  const Result more = headlab(fmt::format("train '{}' --out run --resume {} --set train.steps=30 "
                                          "--set model.norm=post --set optim.betas=0.9,0.98",
                                          kTiny, kQuick),
                              d);
  REQUIRE_MESSAGE(more.code == 0, more.err);
  CHECK(json::parse(read_text(d / "run" / "run.json"))["sessions"].size() == 2);
  CHECK(read_text(d / "run" / "train.log").find("resuming at step 24 of 30") != std::string::npos);
}

TEST_CASE("train: cli configs at the edges of the schema train to the end with their analysis") {
  TempDir dir;
  const fs::path& d = dir.path;
  const std::vector<std::string> edges = {
      "--set train.eval_batch_size=3",  // fewer sentences than the analysis' 4 examples
      "--set train.eval_batch_size=1 --set train.eval_batches=1",
      "--set train.batch_size=1",
      "--set model.heads=1",
      "--set model.layers=2 --set model.heads=8",
      "--set task.relations=PREV",
      "--set schedule.name=constant --set schedule.warmup_steps=0",
      "--set model.positions=sinusoidal --set model.norm=post --set model.activation=gelu",
      "--set train.eval_every=1 --set train.log_every=1 --set train.checkpoint_every=1",
  };
  int index = 0;
  for (const std::string& edge : edges) {
    const std::string out = fmt::format("run-{}", index++);
    const Result r = headlab(fmt::format("train '{}' --out {} --quiet --set train.steps=4 "
                                         "--set schedule.warmup_steps=1 {}",
                                         kTiny, out, edge),
                             d);
    CHECK_MESSAGE(r.code == 0, edge << ": " << r.err);
    CHECK_MESSAGE(fs::exists(d / out / "report.html"), edge);
    CHECK_MESSAGE(fs::exists(d / out / "heads.json"), edge);
  }
}

TEST_CASE(
    "train: cli bench --kernels times every shape and marks the bf16 rows the step does not run") {
  TempDir dir;
  const Result r = headlab("bench --kernels --threads 1 --json", dir.path);
  REQUIRE_MESSAGE(r.code == 0, r.err);
  const json k = json::parse(r.out);  // the whole output, indented
  REQUIRE(!k["peak"].empty());
  const bool bf16 = !k["bf16_peak"].empty();  // where the CPU has AVX512_BF16
  int bf16_rows = 0, not_in_step = 0;
  for (const json& row : k["matmul"]) {
    CHECK(row["gflops"].get<double>() > 0);
    if (row.value("precision", "fp32") != "bf16") {
      CHECK(!row.contains("in_step"));
      continue;
    }
    ++bf16_rows;
    // A batched product stays fp32 in a bf16 step: its row times headlab's bf16 GEMM directly
    // and is marked; a single product is what the step runs.
    CHECK(row.value("in_step", true) == (row["batch"].get<int64_t>() == 1));
    not_in_step += row.value("in_step", true) ? 0 : 1;
  }
  CHECK((bf16_rows > 0) == bf16);
  CHECK((not_in_step > 0) == bf16);
  CHECK(!k["attention"].empty());
}

TEST_CASE("train: cli bench --config times a config's step, --profile splits it by op") {
  TempDir dir;
  const Result step =
      headlab(fmt::format("bench --config '{}' --steps 3 --warmup 1 --json", kTiny), dir.path);
  REQUIRE_MESSAGE(step.code == 0, step.err);
  const json r = json::parse(lines(step.out).back());
  CHECK(r["config"] == kTiny);
  CHECK(r["steps"] == 3);
  CHECK(r["seq"] == 17);
  CHECK(r["params"].get<int64_t>() > 0);
  CHECK(r["train_step_ms_median"].get<double>() > 0);
  CHECK(r["gemm_only_ms"].get<double>() > 0);
  CHECK(r["fwd_matmul_flops"].get<double>() > 0);
  for (const auto& entry : fs::directory_iterator(dir.path))  // no run directory: only the output
    CHECK(entry.path().filename().string().rfind(".std", 0) == 0);

  const Result prof = headlab(
      fmt::format("bench --config '{}' --profile --steps 2 --warmup 1 --json --set model.layers=2",
                  kTiny),
      dir.path);
  REQUIRE_MESSAGE(prof.code == 0, prof.err);
  const json p = json::parse(lines(prof.out).back());
  CHECK(p.value("precision", "") == "fp32");  // the header names the precision it ran
  double share = 0;
  bool fwd_attention = false, bwd_linear = false, update = false;
  for (const json& row : p["rows"]) {
    share += row["share"].get<double>();
    const std::string kind = row["kind"], op = row["op"];
    fwd_attention |= kind == "forward" && op == "self_attention" && row["calls"] == 2.0;
    bwd_linear |= kind == "backward" && op == "linear" && row["gemm_only_ms"].get<double>() > 0;
    update |= kind == "region" && op == "optimizer.step" && row["calls"] == 1.0;
  }
  CHECK(share == doctest::Approx(1.0));
  CHECK(fwd_attention);  // one per layer
  CHECK(bwd_linear);
  CHECK(update);
  check_user_error(headlab("bench --profile", dir.path), "bench --profile", "--profile needs");
}
