// The trainer: configs/tiny.toml learns end to end and writes its run files; an interrupted
// and resumed run equals an uninterrupted one bit for bit; a non-finite loss stops training
// before the update and leaves the last checkpoint as it was; run directories are guarded.

#include <doctest/doctest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "layers/encoder.h"
#include "optim/optimizer.h"
#include "tests/temp_dir.h"
#include "tests/train/trainer_test_util.h"
#include "train/config/config.h"
#include "train/run/checkpoint.h"
#include "train/run/metrics.h"
#include "train/run/run_dir.h"
#include "train/run/trainer.h"

using namespace headlab;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

using TempDir = testing::TempDir;
using trainer_test::bitwise_equal;
using trainer_test::Recorder;
using trainer_test::tiny;

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<json> read_rows(const fs::path& p) {
  std::vector<json> rows;
  std::istringstream in(read_text(p));
  std::string line;
  while (std::getline(in, line)) rows.push_back(json::parse(line));
  return rows;
}

}  // namespace

TEST_CASE("train: trainer learns configs/tiny.toml and writes the run files") {
  TempDir dir("headlab-trainer");
  Trainer trainer(tiny(), dir.path / "run");
  Recorder rec;
  const TrainResult r = trainer.run(&rec);

  const TrainConfig& t = trainer.config().train;
  REQUIRE(rec.steps.size() == static_cast<size_t>(t.steps));
  CHECK(r.steps == t.steps);
  CHECK_FALSE(r.interrupted);
  // Chance level is ln(64) = 4.16 nats; tiny.toml falls to well below half of its first loss.
  double first = 0, last = 0;
  for (int i = 0; i < 10; ++i) first += rec.steps[i].loss / 10;
  for (size_t i = rec.steps.size() - 10; i < rec.steps.size(); ++i) last += rec.steps[i].loss / 10;
  CHECK(first > 3.9);
  CHECK(last < 0.5 * first);
  CHECK(r.final_eval.loss < 0.5 * first);
  CHECK(r.final_eval.accuracy > 0.2);  // chance: 1/64
  REQUIRE(r.final_eval.relation_accuracy.size() == 3);
  CHECK(r.final_eval.relation_accuracy[1] > 0.9);  // HEAD is learned first

  // Files: resolved config, metrics rows at the logged steps, eval rows, checkpoints, summary.
  const fs::path run = dir.path / "run";
  const Config resolved = load_config(run / "config.resolved.toml");
  CHECK(to_toml(resolved) == to_toml(trainer.config()));
  const std::vector<json> rows = read_rows(run / "metrics.jsonl");
  std::vector<int64_t> train_steps, eval_steps;
  for (const json& row : rows) {
    if (row.value("eval", false)) {
      eval_steps.push_back(row["step"]);
      CHECK(row["component_accuracy"].contains("PREV"));
    } else {
      train_steps.push_back(row["step"]);
      for (const char* key :
           {"loss", "accuracy", "lr", "grad_norm", "tokens_per_second", "elapsed_seconds"})
        CHECK_MESSAGE(row.contains(key), key);
      const StepMetrics& m = rec.steps[row["step"].get<size_t>() - 1];
      CHECK(row["loss"].get<double>() == m.loss);
      CHECK(row["grad_norm"].get<double>() == m.grad_norm);
    }
  }
  CHECK(train_steps.size() == static_cast<size_t>(t.steps / t.log_every));
  CHECK(train_steps.back() == t.steps);
  CHECK(eval_steps == std::vector<int64_t>{50, 100, 150});
  CHECK(rec.evals.back().accuracy == r.final_eval.accuracy);
  const std::optional<fs::path> latest = latest_checkpoint(run);
  REQUIRE(latest);
  CHECK(latest->filename() == "step-000150");
  CHECK(fs::exists(run / "checkpoints" / "step-000100"));
  CHECK_FALSE(fs::exists(run / "checkpoints" / "step-000050"));  // keep_checkpoints = 2
  const json summary = json::parse(read_text(run / "summary.json"));
  for (const char* key : {"eval_accuracy", "eval_loss", "steps", "train_seconds",
                          "steps_per_second", "heads", "seed", "steps_to_95", "versions"})
    CHECK_MESSAGE(summary.contains(key), key);
  CHECK(summary["eval_accuracy"].get<double>() == r.final_eval.accuracy);
  CHECK(summary["heads"] == 4);
  CHECK(summary["steps"] == t.steps);
  CHECK(summary["versions"].contains("onednn"));
  // Never reached 95%: null.
  CHECK((r.steps_to_95 < 0) == summary["steps_to_95"].is_null());
}

TEST_CASE("train: trainer resume continues bit-identically (2k straight vs k, stop, resume k)") {
  for (const char* accum : {"1", "2"}) {
    CAPTURE(accum);
    // Dropout on the residuals and attention weights, so the masks' keys matter too.
    const std::vector<std::string> sets = {
        "train.steps=40",      "train.checkpoint_every=1000",
        "train.eval_every=15", "train.log_every=1",
        "model.dropout=0.1",   std::string("train.grad_accum=") + accum};
    TempDir dir("headlab-trainer");
    Trainer straight(tiny(sets), dir.path / "straight");
    Recorder a;
    straight.run(&a);

    Recorder b1;
    b1.stop_at = 20;
    {
      Trainer first(tiny(sets), dir.path / "resumed");
      const TrainResult r = first.run(&b1);
      CHECK(r.interrupted);
      CHECK(r.steps == 20);
    }
    CHECK(latest_checkpoint(dir.path / "resumed")->filename() == "step-000020");
    Trainer second(tiny(sets), dir.path / "resumed");
    second.resume();
    CHECK(second.step() == 20);
    Recorder b2;
    second.run(&b2);

    REQUIRE(a.steps.size() == 40);
    REQUIRE(b1.steps.size() == 20);
    REQUIRE(b2.steps.size() == 20);
    for (size_t i = 0; i < 40; ++i) {
      const StepMetrics& s = i < 20 ? b1.steps[i] : b2.steps[i - 20];
      CHECK(s.step == a.steps[i].step);
      CHECK(s.loss == a.steps[i].loss);  // exact
      CHECK(s.grad_norm == a.steps[i].grad_norm);
      CHECK(s.lr == a.steps[i].lr);
    }
    const StateDict wa = straight.model().state_dict(), wb = second.model().state_dict();
    REQUIRE(wa.size() == wb.size());
    for (size_t i = 0; i < wa.size(); ++i) {
      CHECK(wa[i].name == wb[i].name);
      CHECK_MESSAGE(bitwise_equal(wa[i].tensor, wb[i].tensor), wa[i].name);
    }
    const StateDict oa = straight.optimizer().state_dict(), ob = second.optimizer().state_dict();
    REQUIRE(oa.size() == ob.size());
    for (size_t i = 0; i < oa.size(); ++i)
      CHECK_MESSAGE(bitwise_equal(oa[i].tensor, ob[i].tensor), oa[i].name);
    CHECK(a.evals.back().loss == b2.evals.back().loss);

    // metrics.jsonl of the resumed run has every step once, with the straight run's losses.
    const std::vector<json> ra = read_rows(dir.path / "straight" / "metrics.jsonl");
    const std::vector<json> rb = read_rows(dir.path / "resumed" / "metrics.jsonl");
    std::vector<double> la, lb;
    for (const json& r : ra)
      if (!r.value("eval", false)) la.push_back(r["loss"]);
    for (const json& r : rb)
      if (!r.value("eval", false)) lb.push_back(r["loss"]);
    CHECK(la.size() == 40);
    CHECK(la == lb);
  }
}

TEST_CASE("train: trainer refuses a checkpoint whose config is another run") {
  TempDir dir("headlab-trainer");
  {
    Trainer t(tiny({"train.steps=24", "train.eval_every=0"}), dir.path / "run");
    t.run();
  }
  Trainer other(tiny({"train.steps=30", "model.heads=8"}), dir.path / "run");
  try {
    other.resume();
    FAIL("no error");
  } catch (const Error& e) {
    const std::string m = e.what();
    CHECK_MESSAGE(m.find("model.heads: 4 (checkpoint) vs 8 (config)") != std::string::npos, m);
    CHECK_MESSAGE(m.find("step-000024") != std::string::npos, m);
  }
  // Another learning rate is another run; more steps and another cadence are the same run.
  Trainer faster(tiny({"train.steps=30", "optim.lr=1e-3"}), dir.path / "run");
  CHECK_THROWS_WITH_AS(faster.resume(), doctest::Contains("optim.lr: 0.005 (checkpoint) vs 0.001"),
                       Error);
  Trainer longer(tiny({"train.steps=30", "train.log_every=3"}), dir.path / "run");
  longer.resume();
  CHECK(longer.step() == 24);
}

TEST_CASE("train: gradient accumulation splits the same global batch: same sentences and masks") {
  // 32 sentences per step as 1 x 32, 2 x 16 or 4 x 8: the same sentences and dropout masks, so
  // the same losses and weights up to the GEMMs' rounding at another row count.
  const std::vector<std::string> common = {"train.steps=6", "train.eval_every=0",
                                           "schedule.warmup_steps=2", "train.log_every=1",
                                           "model.dropout=0.1"};
  TempDir dir("headlab-trainer");
  std::vector<Recorder> recorders(3);
  std::vector<StateDict> weights;
  const int64_t accums[] = {1, 2, 4};
  for (size_t k = 0; k < 3; ++k) {
    std::vector<std::string> sets = common;
    sets.push_back(fmt::format("train.grad_accum={}", accums[k]));
    sets.push_back(fmt::format("train.batch_size={}", 32 / accums[k]));
    Trainer t(tiny(sets), dir.path / fmt::format("accum-{}", accums[k]));
    const TrainResult r = t.run(&recorders[k]);
    weights.push_back(t.model().state_dict());
    const json summary =
        json::parse(read_text(dir.path / fmt::format("accum-{}", accums[k]) / "summary.json"));
    CHECK(summary["global_batch"] == 32);
    CHECK(summary["grad_accum"] == accums[k]);
    CHECK(r.ranks == 1);
  }
  for (size_t k = 1; k < 3; ++k) {
    CAPTURE(accums[k]);
    for (size_t i = 0; i < 6; ++i) {
      CHECK(recorders[k].steps[i].loss ==
            doctest::Approx(recorders[0].steps[i].loss).epsilon(1e-5));
      CHECK(recorders[k].steps[i].accuracy == recorders[0].steps[i].accuracy);
      CHECK(recorders[k].steps[i].grad_norm ==
            doctest::Approx(recorders[0].steps[i].grad_norm).epsilon(1e-4));
    }
    // Adam moves an element whose gradient is almost 0 by a full step either way, so compare
    // the weights on average, not element by element.
    double diff = 0, count = 0;
    for (size_t i = 0; i < weights[0].size(); ++i)
      for (int64_t j = 0; j < weights[0][i].tensor.numel(); ++j, ++count)
        diff += std::fabs(weights[k][i].tensor[j] - weights[0][i].tensor[j]);
    CHECK(diff / count < 1e-5);
  }
}

TEST_CASE("train: resume refuses another global batch and accepts another split of it") {
  TempDir dir("headlab-trainer");
  {
    Trainer t(
        tiny({"train.steps=24", "train.eval_every=0", "train.batch_size=16", "train.grad_accum=2"}),
        dir.path / "run");
    t.run();
  }
  Trainer other(tiny({"train.steps=30", "train.batch_size=16"}), dir.path / "run");
  try {
    other.resume();
    FAIL("no error");
  } catch (const Error& e) {
    const std::string m = e.what();
    CHECK_MESSAGE(m.find("the global batch: 32 (checkpoint) vs 16 (config) (train.grad_accum: 2 "
                         "(checkpoint) vs 1 (config))") != std::string::npos,
                  m);
  }
  Trainer split(tiny({"train.steps=30", "train.batch_size=8", "train.grad_accum=4"}),
                dir.path / "run");
  split.resume();
  CHECK(split.step() == 24);
}

TEST_CASE("train: trainer stops on a non-finite loss before the update, last checkpoint intact") {
  TempDir dir("headlab-trainer");
  const fs::path run = dir.path / "run";
  // One step at lr = 1e30 keeps every value finite (about 1e30); the next loss overflows.
  const std::vector<std::string> sets = {"train.steps=40", "train.checkpoint_every=1000",
                                         "train.eval_every=0", "optim.lr=1e30",
                                         "schedule.name=constant"};
  {
    Trainer t(tiny(sets), run);
    Recorder stop;
    stop.stop_at = 1;
    t.run(&stop);
  }
  const fs::path ckpt = run / "checkpoints" / "step-000001";
  const std::string model_bytes = read_text(ckpt / "model.safetensors");
  const std::string optim_bytes = read_text(ckpt / "optimizer.safetensors");
  const std::string state_bytes = read_text(ckpt / "state.json");
  REQUIRE(model_bytes.size() > 1000);

  Trainer t(tiny(sets), run);
  t.resume();
  Recorder rec;
  int64_t stopped_at = -1;
  try {
    t.run(&rec);
    FAIL("training went on with lr = 1e30");
  } catch (const NonFiniteError& e) {
    stopped_at = e.step();
    const std::string m = e.what();
    CHECK_MESSAGE(m.find(fmt::format("step {}", e.step())) != std::string::npos, m);
    CHECK_MESSAGE(m.find("last checkpoint (step ") != std::string::npos, m);
  }
  REQUIRE(stopped_at >= 2);
  CHECK(t.step() == stopped_at - 1);  // the failing step made no update
  CHECK(latest_checkpoint(run)->filename() == "step-000001");
  CHECK(read_text(ckpt / "model.safetensors") == model_bytes);
  CHECK(read_text(ckpt / "optimizer.safetensors") == optim_bytes);
  CHECK(read_text(ckpt / "state.json") == state_bytes);
  CHECK_FALSE(fs::exists(run / "summary.json"));
}

TEST_CASE("train: trainer guards run directories and names layer option mistakes") {
  TempDir dir("headlab-trainer");
  const fs::path run = dir.path / "run";
  CHECK(check_run_dir(run, RunDirUse::create) == RunDirPlan::create);  // absent: fine
  fs::create_directories(run);
  CHECK(check_run_dir(run, RunDirUse::create) == RunDirPlan::adopt_empty);  // empty: fine
  CHECK_THROWS_WITH_AS(check_run_dir(run, RunDirUse::write),
                       doctest::Contains("is not a run directory of headlab"), Error);
  std::ofstream(run / "metrics.jsonl") << "{}\n";
  CHECK_THROWS_WITH_AS(check_run_dir(run, RunDirUse::create),
                       doctest::Contains("not empty and was not created by headlab"), Error);

  const Config bad =
      parse_config("[task]\nname = \"dependency\"\n[model.norm_options]\nepss = 1e-6\n", "t.toml");
  try {
    Trainer t(bad, dir.path / "x");
    FAIL("no error");
  } catch (const Error& e) {
    const std::string m = e.what();
    CHECK_MESSAGE(m.find("t.toml:3:") != std::string::npos, m);
    CHECK_MESSAGE(m.find("model.norm_options") != std::string::npos, m);
    CHECK_MESSAGE(m.find("epss") != std::string::npos, m);
  }
  CHECK_FALSE(fs::exists(dir.path / "x"));  // nothing written before training starts
}

TEST_CASE("train: resuming keeps metrics rows through the checkpoint and drops torn or odd lines") {
  TempDir dir;
  const fs::path path = dir.path / "metrics.jsonl";
  const std::string kept =
      "{\"step\":10,\"loss\":2.5}\n"
      "{\"step\":10,\"eval\":true,\"accuracy\":0.5}\n"
      "{\"step\":20,\"eval\":5}\n"     // edited: eval not a bool
      "{\"step\":20,\"eval\":true}\n"  // edited: no accuracy
      "{\"step\":20,\"eval\":true,\"accuracy\":\"x\"}\n";
  std::ofstream(path) << kept << "[1, 2]\n"              // not an object
                      << "{\"step\":\"20\"}\n"           // step not an integer
                      << "{\"step\":30,\"loss\":1.0}\n"  // after the checkpoint
                      << "{\"step\":31,\"lo";            // torn by a crash
  MetricsWriter writer(path, 20);
  CHECK(writer.evals() == std::vector<std::pair<int64_t, double>>{{10, 0.5}});
  std::ifstream in(path);
  CHECK(std::string(std::istreambuf_iterator<char>(in), {}) == kept);
}
