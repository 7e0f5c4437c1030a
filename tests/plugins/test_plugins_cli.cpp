// Plugins through the CLI: a plugin task and layers are trained, evaluated, analysed and
// reported (run.json records the plugin, so eval, analyze and --resume need no flag); a missing
// or changed plugin is exit 2 naming it; runtime.plugins in a config, relative to its folder; a
// sweep passes its plugins to every run; info lists what a plugin registered.

#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/reliability/process.h"
#include "train/io/sha256.h"

using namespace headlab::testing;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

const fs::path kPlugin = fs::path(HEADLAB_TEST_PLUGIN_DIR) / "libheadlab_example_plugin.so";
const std::string kConfig = (source_dir() / "examples" / "plugin" / "plugin.toml").string();
// A short run of plugin.toml: a few seconds.
const std::vector<std::string> kQuick = {"--no-progress",
                                         "--set",
                                         "train.steps=40",
                                         "--set",
                                         "train.eval_every=20",
                                         "--set",
                                         "train.checkpoint_every=20",
                                         "--set",
                                         "schedule.warmup_steps=4",
                                         "--set",
                                         "train.eval_batches=1"};

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

RunResult cli(std::vector<std::string> args, const std::vector<std::string>& more = {}) {
  args.insert(args.end(), more.begin(), more.end());
  return run_cli(args);
}

// Exit 2 with one stderr line containing `part`.
void check_refused(const RunResult& r, const std::string& part) {
  INFO(r.describe());
  CHECK(r.exit_code == 2);
  const auto lines = r.err_lines();
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].find(part) != std::string::npos);
}

}  // namespace

TEST_CASE("plugins: a plugin's task and layers train, evaluate, analyse and report via the CLI") {
  TempDir tmp("plugins-cli");
  const fs::path run = tmp / "run";
  const RunResult t =
      cli({"train", kConfig, "--out", run.string(), "--plugin", kPlugin.string()}, kQuick);
  REQUIRE_MESSAGE(t.exit_code == 0, t.describe());
  // run.json records the plugin by absolute path and digest.
  const json info = json::parse(read_text(run / "run.json"));
  CHECK(info["format_version"] == 1);
  REQUIRE(info["plugins"].size() == 1);
  CHECK(info["plugins"][0]["path"] == kPlugin.string());
  CHECK(info["plugins"][0]["sha256"] == headlab::sha256_file(kPlugin));
  // The task's own relations reach heads.json and the report.
  const json heads = json::parse(read_text(run / "heads.json"));
  CHECK(heads["task"] == "mirror");
  CHECK(heads["relations"] == json::array({"prev", "mirror"}));
  const std::string report = read_text(run / "report.html");
  CHECK(report.find("mirror") != std::string::npos);
  CHECK(report.find("alibi_attention") != std::string::npos);
  CHECK(report.find("HEAD") == std::string::npos);  // nothing of the dependency task
  CHECK(report.find("gold partners of the mirror task's relations") != std::string::npos);
  // The report's Versions table names the plugin the run loaded.
  CHECK(report.find("<td class=\"l\">plugin</td><td class=\"l\">" + kPlugin.string() + " (sha256 " +
                    headlab::sha256_file(kPlugin).substr(0, 16)) != std::string::npos);
  // eval, analyze and --resume load the plugin from run.json, without --plugin.
  const RunResult e = cli({"eval", run.string(), "--json"});
  REQUIRE_MESSAGE(e.exit_code == 0, e.describe());
  const json metrics = json::parse(e.out);
  CHECK(metrics["component_accuracy"].contains("mirror"));
  const RunResult a = cli({"analyze", run.string()});
  CHECK_MESSAGE(a.exit_code == 0, a.describe());
  const RunResult r = cli({"train", kConfig, "--out", run.string(), "--resume", "--no-analysis",
                           "--no-progress", "--set", "train.steps=60", "--set",
                           "train.eval_every=20", "--set", "train.checkpoint_every=20", "--set",
                           "schedule.warmup_steps=4", "--set", "train.eval_batches=1"});
  CHECK_MESSAGE(r.exit_code == 0, r.describe());
  CHECK(json::parse(read_text(run / "run.json"))["plugins"].size() == 1);
}

TEST_CASE("plugins: a run whose plugin went missing or changed is exit 2 naming it") {
  TempDir tmp("plugins-changed");
  const fs::path copy = tmp / "libcopy.so", run = tmp / "run";
  fs::copy_file(kPlugin, copy);
  const RunResult t =
      cli({"train", kConfig, "--out", run.string(), "--plugin", copy.string(), "--no-analysis"},
          kQuick);
  REQUIRE_MESSAGE(t.exit_code == 0, t.describe());
  std::ofstream(copy, std::ios::app) << "changed";
  const std::string name = "plugin '" + copy.string() + "'";
  check_refused(cli({"eval", run.string()}), name + ": has changed since the run recorded it");
  check_refused(cli({"analyze", run.string()}), name + ": has changed");
  check_refused(cli({"train", kConfig, "--out", run.string(), "--resume"}), name + ": has changed");
  fs::remove(copy);
  check_refused(cli({"eval", run.string()}),
                (run / "run.json").string() + ": " + name + ": no such file");
}

TEST_CASE("plugins: runtime.plugins loads a plugin relative to the config's folder") {
  TempDir tmp("plugins-config");
  fs::create_directories(tmp / "cfg" / "lib");
  fs::copy_file(kPlugin, tmp / "cfg" / "lib" / "libmine.so");
  std::ofstream(tmp / "cfg" / "run.toml")
      << read_text(kConfig) << "\n[runtime]\nplugins = [\"lib/libmine.so\"]\n";
  const fs::path run = tmp / "run";
  const RunResult t =
      cli({"train", (tmp / "cfg" / "run.toml").string(), "--out", run.string(), "--no-analysis"},
          kQuick);
  REQUIRE_MESSAGE(t.exit_code == 0, t.describe());
  const json info = json::parse(read_text(run / "run.json"));
  CHECK(info["plugins"][0]["path"] == (tmp / "cfg" / "lib" / "libmine.so").string());
  // The resolved config keeps the path absolute, so eval reads it from the checkpoint too.
  CHECK(read_text(run / "config.resolved.toml").find((tmp / "cfg" / "lib").string()) !=
        std::string::npos);
  CHECK(cli({"eval", run.string()}).exit_code == 0);
}

TEST_CASE("plugins: a sweep passes its plugins to every run") {
  TempDir tmp("plugins-sweep");
  const RunResult s = cli({"sweep", kConfig, "--out", (tmp / "sweep").string(), "--over",
                           "model.heads=1,2", "--plugin", kPlugin.string(), "--no-progress"},
                          {"--set", "train.steps=20", "--set", "train.eval_every=0", "--set",
                           "schedule.warmup_steps=2", "--set", "train.eval_batches=1"});
  REQUIRE_MESSAGE(s.exit_code == 0, s.describe());
  for (const char* dir : {"heads-1_seed-1", "heads-2_seed-1"}) {
    CAPTURE(dir);
    const json info = json::parse(read_text(tmp / "sweep" / dir / "run.json"));
    CHECK(info["plugins"][0]["path"] == kPlugin.string());
  }
}

TEST_CASE("plugins: gradcheck --plugin checks a plugin's op on every backend, --only selects it") {
  const RunResult r = cli({"gradcheck", "--plugin", kPlugin.string(), "--only", "squareplus"});
  REQUIRE_MESSAGE(r.exit_code == 0, r.describe());
  CHECK(r.out.find("9 checks, 0 failed") != std::string::npos);  // 3 cases x 3 backends
  int rows = 0;  // a passing row per case and backend: name, case, kind, backend ... pass
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);)
    if (line.starts_with("squareplus ")) {
      CHECK(line.ends_with("pass"));
      CHECK(line.find(" op ") != std::string::npos);
      ++rows;
    }
  CHECK(rows == 9);
  CHECK(r.out.find("b = 0.5, [2, 2, 3]") != std::string::npos);
}

TEST_CASE("plugins: a plugin op with a wrong backward fails gradcheck with exit 4 naming it") {
  const fs::path bad = fs::path(HEADLAB_TEST_PLUGIN_DIR) / "libheadlab_bad_gradient.so";
  const RunResult r = cli({"gradcheck", "--plugin", bad.string(), "--only", "test_wrong_backward",
                           "--backend", "reference"});
  INFO(r.describe());
  CHECK(r.exit_code == 4);  // kGradcheckFailed, README's exit-code table
  for (const char* variant : {"plain [2, 3]", "size-1 dims [1, 4]"}) {
    CAPTURE(variant);
    // The row names the op and the case and says FAIL; the next line is the worst element.
    const size_t row = r.out.find(std::string("test_wrong_backward  ") + variant);
    REQUIRE(row != std::string::npos);
    const std::string line = r.out.substr(row, r.out.find('\n', row) - row);
    CHECK(line.ends_with("FAIL"));
  }
  CHECK(r.out.find("analytic") != std::string::npos);
  CHECK(r.out.find("2 checks, 2 failed") != std::string::npos);
  // --json: one object per case, pass false and the worst element.
  const RunResult j = cli({"gradcheck", "--plugin", bad.string(), "--only", "test_wrong_backward",
                           "--backend", "blas", "--json"});
  CHECK(j.exit_code == 4);
  const json first = json::parse(j.out.substr(0, j.out.find('\n')));
  CHECK(first["name"] == "test_wrong_backward");
  CHECK(first["variant"] == "plain [2, 3]");
  CHECK(first["pass"] == false);
}

TEST_CASE("plugins: headlab info lists what each loaded plugin registered") {
  const RunResult r = cli({"info", "--plugin", kPlugin.string(), "--plugin", kPlugin.string()});
  REQUIRE_MESSAGE(r.exit_code == 0, r.describe());
  CHECK(r.out.find("plugins: 1\n  " + kPlugin.string() + " (sha256 ") != std::string::npos);
  CHECK(r.out.find("    layer swiglu (feed_forward)\n    layer alibi_attention (attention)\n"
                   "    layer talking_heads_attention (attention)\n    task mirror\n"
                   "    op squareplus (3 gradcheck cases)\n"
                   "    optimizer lion\n    schedule linear_decay\n") != std::string::npos);
  CHECK(r.out.find("  attention: alibi_attention, multi_head_attention, "
                   "talking_heads_attention\n") != std::string::npos);
  CHECK(r.out.find("tasks: conllu, dependency, induction, jsonl, mirror\noptimizers: adam, adamw, "
                   "lion, sgd\n"
                   "schedules: constant, linear_decay, warmup_cosine, warmup_inverse_sqrt\n") !=
        std::string::npos);
}

namespace {

// The tiny dependency config with another attention layer, 1 layer x 4 heads.
fs::path dependency_config(const fs::path& dir, const std::string& attention) {
  const fs::path path = dir / (attention + ".toml");
  std::ofstream(path) << "[model]\nd_model = 32\nheads = 4\nlayers = 1\nd_ff = 64\n"
                      << "attention_layer = \"" << attention << "\"\n"
                      << "[task]\nname = \"dependency\"\n[optim]\nlr = 5e-3\n"
                      << "[schedule]\nwarmup_steps = 10\n[train]\nsteps = 120\nbatch_size = 32\n"
                      << "eval_every = 0\neval_batches = 2\neval_batch_size = 64\n"
                      << "checkpoint_every = 60\n";
  return path;
}

}  // namespace

TEST_CASE("plugins: a talking-heads attention (non-additive) gets ablations, importance and maps") {
  TempDir tmp("plugins-talking-heads");
  const fs::path config = dependency_config(tmp.path(), "talking_heads_attention");
  const fs::path run = tmp / "run";
  const RunResult t = cli({"train", config.string(), "--out", run.string(), "--plugin",
                           kPlugin.string(), "--no-progress"});
  REQUIRE_MESSAGE(t.exit_code == 0, t.describe());
  const json heads = json::parse(read_text(run / "heads.json"));
  const double base = heads["eval_accuracy"].get<double>();
  int changed = 0;
  double importance = 0;
  for (const json& h : heads["layers"][0]["heads"]) {
    if (std::abs(h["ablation_accuracy"].get<double>() - base) > 1e-9) ++changed;
    importance += h["importance"].get<double>();
    CHECK(h.contains("mean_ablation_accuracy"));
  }
  // Every head's output reaches the classifier: removing any one changes the accuracy, and the
  // gradient at the gate is not zero (the class of failure this replaces: all 0.000, exit 0).
  CHECK(changed == 4);
  CHECK(importance > 0.5);
  // Patching through the same points: some head restores part of every relation's difference.
  REQUIRE(heads["patching"].is_object());
  for (const char* r : {"PREV", "HEAD", "SEM"}) {
    CAPTURE(r);
    double best = 0;
    for (const json& h : heads["layers"][0]["heads"])
      if (h["patching_restored"][r].is_number())
        best = std::max(best, h["patching_restored"][r].get<double>());
    CHECK(best > 0.05);
  }
  // The maps, read at hook_pattern: 4 examples x 1 layer x 4 heads x 17 x 17 float32 after the
  // .npy header.
  CHECK(fs::file_size(run / "attention.npy") >= 4 * 1 * 4 * 17 * 17 * sizeof(float));
}

TEST_CASE("plugins: analyze refuses an attention layer without hook points in one line") {
  TempDir tmp("plugins-opaque");
  const fs::path plugin = fs::path(HEADLAB_TEST_PLUGIN_DIR) / "libheadlab_opaque_attention.so";
  const fs::path config = dependency_config(tmp.path(), "opaque_attention");
  const fs::path run = tmp / "run";
  const RunResult t =
      cli({"train", config.string(), "--out", run.string(), "--plugin", plugin.string(),
           "--no-progress", "--no-analysis", "--set", "train.steps=20"});
  REQUIRE_MESSAGE(t.exit_code == 0, t.describe());
  check_refused(cli({"analyze", run.string()}),
                "analyze: layer 0's attention 'opaque_attention' does not pass its values "
                "through blocks.0.attn.hook_pattern and blocks.0.attn.hook_z");
  CHECK(!fs::exists(run / "heads.json"));
}

TEST_CASE("plugins: train --dry-run runs the model and refuses a layer with a shape bug") {
  TempDir tmp("plugins-shape-bug");
  const fs::path plugin = fs::path(HEADLAB_TEST_PLUGIN_DIR) / "libheadlab_shape_bug.so";
  const std::string tiny = (source_dir() / "configs" / "tiny.toml").string();
  const fs::path run = tmp / "run";
  check_refused(cli({"train", tiny, "--out", run.string(), "--plugin", plugin.string(), "--set",
                     "model.ffn_layer=shape_bug_ffn", "--dry-run"}),
                "encoder.layers.0.ffn (shape_bug_ffn): returned an output of shape ");
  CHECK(!fs::exists(run));
  // The same config with the built-in layer passes the trial and says what it would write.
  const RunResult ok = cli({"train", tiny, "--out", run.string(), "--dry-run"});
  CHECK_MESSAGE(ok.exit_code == 0, ok.describe());
  CHECK(ok.out.find("would write: ") != std::string::npos);
  CHECK(!fs::exists(run));
}
