// The built CLI (HEADLAB_CLI): exit codes 0 / 2 / 3, every user mistake reported as one
// "headlab: error: ..." line and nothing else on stderr, --help listing every option, and
// train -> eval -> resume through the command line.

#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

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
      {"", "subcommand"},
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
      {fmt::format("train '{}' --out empty --resume", kTiny), "no checkpoint"},
      {fmt::format("train '{}' --out run --resume --set model.heads=8", kTiny),
       "model.heads: 4 (checkpoint) vs 8 (config)"},
      {"eval nowhere", "'nowhere' is not a directory"},
      {"eval empty", "no checkpoint"},
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
  REQUIRE(headlab(fmt::format("train '{}' --out run {}", kTiny, kQuick), d).code == 0);
  const fs::path ckpt = d / "run" / "checkpoints" / "step-000024";
  const std::string before = read_text(ckpt / "model.safetensors");
  const Result r = headlab(fmt::format("train '{}' --out run --resume {} --set train.steps=60 "
                                       "--set optim.lr=1e30 --set train.checkpoint_every=1000",
                                       kTiny, kQuick),
                           d);
  INFO("stderr: ", r.err);
  CHECK(r.code == 3);
  const std::vector<std::string> err = lines(r.err);
  REQUIRE_FALSE(err.empty());
  CHECK(err.back().rfind("headlab: error: training stopped at step ", 0) == 0);
  CHECK(err.back().find("last checkpoint (step 24) is untouched") != std::string::npos);
  CHECK(fs::read_symlink(d / "run" / "checkpoints" / "latest") == "step-000024");
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
