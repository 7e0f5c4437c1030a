// Sweeps: parsing --over, planning the grid (every config validated up front), the sweep.json and
// sweep.csv formats, and a tiny sweep through the CLI.

#include <doctest/doctest.h>

#include <algorithm>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tests/train/analysis_test_util.h"
#include "train/sweep/collect.h"

using namespace headlab;
using namespace headlab::analysis_test;
using nlohmann::json;

namespace {

const fs::path kTiny = fs::path(HEADLAB_SOURCE_DIR) / "configs" / "tiny.toml";

SweepSpec tiny_spec(const fs::path& out, const std::string& over, int64_t seeds) {
  SweepSpec s;
  s.config = kTiny;
  s.over = {parse_over(over)};
  s.seeds = seeds;
  s.out_dir = out;
  return s;
}

}  // namespace

TEST_CASE("train: --over parsing splits values at top-level commas only") {
  const SweepAxis a = parse_over("model.heads=1,2, 4,8");
  CHECK(a.key == "model.heads");
  CHECK(a.values == std::vector<std::string>{"1", "2", "4", "8"});
  const SweepAxis b = parse_over("optim.betas=[0.9,0.98],[0.8, 0.9]");
  CHECK(b.values == std::vector<std::string>{"[0.9,0.98]", "[0.8, 0.9]"});
  const SweepAxis c = parse_over("model.norm=\"pre\",'a,b'");
  CHECK(c.values == std::vector<std::string>{"\"pre\"", "'a,b'"});
  CHECK_THROWS_WITH_AS(parse_over("model.heads"), doctest::Contains("no '='"), Error);
  CHECK_THROWS_AS(parse_over("=1,2"), Error);
  CHECK_THROWS_WITH_AS(parse_over("model.heads=1,,2"), doctest::Contains("empty"), Error);
  CHECK_THROWS_AS(parse_over("optim.betas=[0.9,0.98"), Error);
}

TEST_CASE("train: plan_sweep builds the grid x seeds and validates every run first") {
  TempDir dir("headlab-plan");
  SweepSpec spec = tiny_spec(dir.path, "model.heads=1,2", 2);
  spec.over.push_back(parse_over("optim.lr=1e-3,2e-3,3e-3"));
  const std::vector<SweepRun> runs = plan_sweep(spec);
  REQUIRE(runs.size() == 2 * 3 * 2);
  // The first key turns slowest, seeds fastest; seeds are train.seed (1 in tiny.toml) + 0, 1.
  CHECK(runs[0].values[0].second == "1");
  CHECK(runs[0].values[1].second == "1e-3");
  CHECK(runs[0].seed == 1);
  CHECK(runs[1].seed == 2);
  CHECK(runs[2].values[1].second == "2e-3");
  CHECK(runs[6].values[0].second == "2");
  CHECK(runs[11].dir == dir.path / "heads-2_lr-3e-3_seed-2");
  CHECK(std::find(runs[11].overrides.begin(), runs[11].overrides.end(), "train.seed=2") !=
        runs[11].overrides.end());

  CHECK_THROWS_WITH_AS(plan_sweep(tiny_spec(dir.path, "model.headz=1,2", 1)),
                       doctest::Contains("model.headz"), Error);
  // heads = 5 does not divide d_model = 64: found before anything trains.
  CHECK_THROWS_WITH_AS(plan_sweep(tiny_spec(dir.path, "model.heads=4,5", 1)),
                       doctest::Contains("model.heads"), Error);
  SweepSpec twice = tiny_spec(dir.path, "model.heads=1", 1);
  twice.over.push_back(parse_over("model.heads=2"));
  CHECK_THROWS_WITH_AS(plan_sweep(twice), doctest::Contains("twice"), Error);
  CHECK_THROWS_AS(plan_sweep(tiny_spec(dir.path, "model.heads=1", 0)), Error);
  CHECK_THROWS_WITH_AS(plan_sweep(tiny_spec(dir.path, "model.heads=1", kMaxSeeds + 1)),
                       doctest::Contains("--seeds = 10001 is out of range"), Error);
  CHECK_THROWS_AS(plan_sweep(tiny_spec(dir.path, "train.seed=1,2", 1)), Error);
  // The same run twice, however the value is spelled, is refused before anything trains.
  CHECK_THROWS_WITH_AS(plan_sweep(tiny_spec(dir.path, "model.heads=2,2", 1)),
                       doctest::Contains("are the same run"), Error);
  CHECK_THROWS_WITH_AS(plan_sweep(tiny_spec(dir.path, "optim.lr=1e-3,0.001", 1)),
                       doctest::Contains("optim.lr=1e-3 seed=1 and optim.lr=0.001 seed=1"), Error);
}

TEST_CASE("train: plan_sweep names directories from values, bounded and unique") {
  TempDir dir("headlab-plan-names");
  // Strings are values, not TOML: no quotes in names, CSV cells or sweep.json.
  const std::vector<SweepRun> runs =
      plan_sweep(tiny_spec(dir.path, "model.activation=relu,'gelu'", 1));
  REQUIRE(runs.size() == 2);
  CHECK(runs[0].dir == dir.path / "activation-relu_seed-1");
  CHECK(runs[1].dir == dir.path / "activation-gelu_seed-1");
  CHECK(runs[1].plain_values[0] == "gelu");
  std::vector<SweepOutcome> outcomes(2);
  outcomes[0].run = runs[0];
  outcomes[1].run = runs[1];
  const SweepSpec spec = tiny_spec(dir.path, "model.activation=relu,'gelu'", 1);
  CHECK(sweep_to_json(spec, outcomes)["runs"][1]["values"]["model.activation"] == "gelu");
  const std::string csv = sweep_to_csv(spec, outcomes);
  CHECK(csv.find("\ngelu,1,") != std::string::npos);
  CHECK(csv.find('"') == std::string::npos);
  // A long value gives a name under the limit that ends in a hash of the whole; two long values
  // that share the head still get two directories.
  const std::string a = "0.001" + std::string(110, '0') + "1";
  const std::vector<SweepRun> long_runs =
      plan_sweep(tiny_spec(dir.path, "optim.lr=" + a + ",0.002", 1));
  REQUIRE(long_runs.size() == 2);
  CHECK(long_runs[0].dir.filename().string().size() <= kMaxRunNameBytes);
  CHECK(long_runs[0].dir.filename().string().rfind("lr-0.00100", 0) == 0);
  CHECK(plain_value("[0.9, 0.98]") == "0.9,0.98");
  CHECK(plain_value("\"post\"") == "post");
}

TEST_CASE("train: sweep.json and sweep.csv carry one row per run, failed runs as nulls") {
  TempDir dir("headlab-sweep-format");
  const SweepSpec spec = tiny_spec(dir.path, "model.heads=1,4", 1);
  const std::vector<SweepRun> runs = plan_sweep(spec);
  std::vector<SweepOutcome> outcomes(2);
  outcomes[0].run = runs[0];
  outcomes[0].ok = true;
  outcomes[0].eval_accuracy = 0.34;
  outcomes[0].train_seconds = 5.5;
  outcomes[0].s_match = 0.2;
  outcomes[0].n_claimed = 1;
  outcomes[0].d_k = 64;
  outcomes[1].run = runs[1];
  outcomes[1].error = "summary.json is missing";
  const json j = sweep_to_json(spec, outcomes);
  CHECK(j["over"] == json::array({"model.heads"}));
  REQUIRE(j["runs"].size() == 2);
  CHECK(j["runs"][0]["values"]["model.heads"] == 1);  // a number, as its TOML text parses
  CHECK(j["runs"][0]["seed"] == 1);
  CHECK(j["runs"][0]["steps_to_95"].is_null());
  CHECK(j["runs"][0]["eval_accuracy"].get<double>() == doctest::Approx(0.34));
  CHECK(j["runs"][0]["dir"] == "heads-1_seed-1");
  CHECK(j["runs"][1]["eval_accuracy"].is_null());
  CHECK(j["runs"][1]["ok"] == false);

  const std::string csv = sweep_to_csv(spec, outcomes);
  CHECK(csv.rfind("model.heads,seed,eval_accuracy,steps_to_95,train_seconds,s_match,s_max,n_"
                  "claimed,d_k,dir,ok,specialized,claim_order,first_claims\n",
                  0) == 0);
  CHECK(std::count(csv.begin(), csv.end(), '\n') == 3);
  CHECK(csv.find("1,1,0.340000,,5.500,") != std::string::npos);
}

TEST_CASE("train: headlab sweep over two head counts writes the table, the runs and the report") {
  TempDir dir("headlab-sweep-cli");
  const std::string cli = HEADLAB_CLI;
  const std::string out = (dir.path / "sw").string();
  const std::string command =
      cli + " sweep " + kTiny.string() + " --over model.heads=1,2 --seeds 1 --out " + out;
  const CommandResult r = run_command(command + " 2>/dev/null");
  REQUIRE(r.code == 0);
  CHECK(r.output.find("model.heads,seed,eval_accuracy") != std::string::npos);

  const json j = json::parse(slurp(dir.path / "sw" / "sweep.json"));
  REQUIRE(j["runs"].size() == 2);
  for (int i = 0; i < 2; ++i) {
    const json& run = j["runs"][i];
    CHECK(run["values"]["model.heads"] == i + 1);
    CHECK(run["ok"] == true);
    CHECK(run["eval_accuracy"].is_number());
    CHECK((run["steps_to_95"].is_null() || run["steps_to_95"].is_number()));
    CHECK(run["s_match"].get<double>() >= 0.0);
    CHECK(run["s_match"].get<double>() <= 1.0);
    CHECK(run["n_claimed"].get<int>() <= i + 1);  // h heads claim at most h relations
    CHECK(run["d_k"] == 64 / (i + 1));
    const fs::path run_dir = dir.path / "sw" / run["dir"].get<std::string>();
    CHECK(slurp(run_dir / "config.resolved.toml").find(fmt::format("heads = {}", i + 1)) !=
          std::string::npos);
    CHECK(fs::exists(run_dir / "report.html"));
  }
  const std::string csv = slurp(dir.path / "sw" / "sweep.csv");
  CHECK(std::count(csv.begin(), csv.end(), '\n') == 3);

  const std::string html = slurp(dir.path / "sw" / "report.html");
  CHECK(check_tags(html) == "");
  CHECK(html.find("2 runs of tiny.toml: 2 settings of model.heads (1, 2) \u00d7 1 seed each "
                  "(train.seed 1). Same d_model in every run, so more heads means narrower heads "
                  "(d_k 64 down to 32).") != std::string::npos);
  CHECK(fs::exists(dir.path / "sw" / "sweep.log"));
  CHECK(slurp(dir.path / "sw" / "sweep.log").find("model.heads=2 seed=1") != std::string::npos);
  CHECK(slurp(dir.path / "sw" / "heads-2_seed-1" / "train.log").find("step ") != std::string::npos);
  // One script: every page's own (boxes that scroll take the focus) and the charts' download
  // buttons (the sweep's sections have none of their own).
  CHECK(html.find("<script") == html.rfind("<script"));
  CHECK(html.find("data-scroll-focus") != std::string::npos);
  CHECK(html.find("chart-dl") != std::string::npos);
  CHECK(section(html, "table").find("model.heads=2") != std::string::npos);
  CHECK(section(html, "curves").find("<polyline") != std::string::npos);
  CHECK(section(html, "specialization").find("s_match") != std::string::npos);
  CHECK(html.find("2 settings of model.heads (1, 2) \u00d7 1 seed each") != std::string::npos);
  CHECK(html.find("more heads means narrower heads (d_k 64 down to 32)") != std::string::npos);
  // Every link of the page opens an existing run report (each seed's dot and table entry).
  size_t links = 0;
  for (size_t p = 0; (p = html.find("<a href=\"", p)) != std::string::npos; ++p) {
    const size_t a = p + 9, b = html.find('"', a);
    const std::string target = html.substr(a, b - a);
    if (target[0] == '#') continue;  // the contents line
    CAPTURE(target);
    CHECK(fs::is_regular_file(dir.path / "sw" / target));
    ++links;
  }
  // Two runs: a dot in each of three charts, a link in the table and one in the claim orders.
  CHECK(links == 2 * 5);
  CHECK(section(html, "grid").empty());  // heat maps need two keys

  // --report-only trains nothing and collects the same table again.
  fs::remove(dir.path / "sw" / "sweep.json");
  const CommandResult again_report = run_command(command + " --report-only 2>&1");
  CHECK(again_report.code == 0);
  CHECK(json::parse(slurp(dir.path / "sw" / "sweep.json")) == j);

  // Running it again into the same directory is refused before anything trains.
  const CommandResult again = run_command(command + " 2>&1");
  CHECK(again.code == 2);
  CHECK(again.output.rfind("headlab: error: ", 0) == 0);
  const CommandResult bad =
      run_command(cli + " sweep " + kTiny.string() + " --over model.headz=1 --out " +
                  (dir.path / "bad").string() + " 2>&1");
  CHECK(bad.code == 2);
  CHECK(std::count(bad.output.begin(), bad.output.end(), '\n') == 1);
  CHECK(bad.output.find("model.headz") != std::string::npos);
  CHECK_FALSE(fs::exists(dir.path / "bad" / "sweep.json"));
}
