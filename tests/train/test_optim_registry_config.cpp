// Registered optimizers and schedules through the config and the trainer: optim.name and
// schedule.name take registered names, their [optim.options] and [schedule.options] are checked
// with positions (and --set into them works), the memory estimate counts the optimizer's
// declared state, and a run with a registered optimizer, schedule and parameter groups resumes
// bit for bit (its state in optimizer.safetensors).

#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "layers/encoder.h"
#include "optim/registry.h"
#include "optim/schedule_registry.h"
#include "tests/temp_dir.h"
#include "train/config/config.h"
#include "train/run/checkpoint.h"
#include "train/run/trainer.h"

using namespace headlab;
namespace fs = std::filesystem;
using V = std::vector<std::string>;

namespace {

// Lion (sign of the interpolated momentum, decoupled decay), one state tensor per parameter.
class TestLion : public Optimizer {
 public:
  TestLion(NamedParameters params, double lr, double b1, double b2, double wd)
      : Optimizer(std::move(params), lr, {"exp_avg"}), b1_(b1), b2_(b2), wd_(wd) {}
  const char* name() const override { return "test_lion"; }

 protected:
  void update_parameter(Tensor& value, const Tensor& grad, std::span<Tensor> state) override {
    const float rate = static_cast<float>(lr());
    const float decay = static_cast<float>(1.0 - lr() * (decays() ? wd_ : 0.0));
    const float b1 = static_cast<float>(b1_), b2 = static_cast<float>(b2_);
    float* p = value.data();
    const float* g = grad.data();
    float* m = state[0].data();
    for (int64_t i = 0; i < value.numel(); ++i) {
      const float c = b1 * m[i] + (1.0f - b1) * g[i];
      p[i] = p[i] * decay - rate * (c > 0.0f ? 1.0f : c < 0.0f ? -1.0f : 0.0f);
      m[i] = b2 * m[i] + (1.0f - b2) * g[i];
    }
  }

 private:
  double b1_, b2_, wd_;
};

// Registers "test_lion" and "test_linear" for one test case (no static registrars: they would
// show in every registry test).
struct Registered {
  Registered() {
    register_optimizer("test_lion",
                       [](const OptimizerOptions& o, NamedParameters params) {
                         return std::make_unique<TestLion>(
                             std::move(params), o.lr, option_real(o.options, "beta1"),
                             option_real(o.options, "beta2"), o.weight_decay);
                       },
                       1,
                       {{"beta1", OptionSpec::real(0, 1, false, true), 0.9},
                        {"beta2", OptionSpec::real(0, 1, false, true), 0.99}});
    register_schedule("test_linear",
                      [](const ScheduleOptions& o, double lr) {
                        const double f = option_real(o.options, "final_fraction");
                        const double n = static_cast<double>(o.total_steps);
                        return Schedule::custom("test_linear", [=](int64_t s) {
                          return lr *
                                 (1.0 - (1.0 - f) * std::min(1.0, static_cast<double>(s - 1) / n));
                        });
                      },
                      {{"final_fraction", OptionSpec::real(0, 1), 0.0}});
  }
  ~Registered() {
    unregister_optimizer("test_lion");
    unregister_schedule("test_linear");
  }
};

const char* kConfig = R"([task]
name = "dependency"

[optim]
name = "test_lion"
lr = 1e-3

[optim.options]
beta1 = 0.95

[schedule]
name = "test_linear"
)";

std::string error_of(const std::string& text, const V& sets = {}) {
  try {
    parse_config(text, "t.toml", sets);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

Config tiny(V sets) {
  return load_config(std::string(HEADLAB_SOURCE_DIR) + "/configs/tiny.toml", sets);
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() &&
         std::memcmp(a.data(), b.data(), sizeof(float) * static_cast<size_t>(a.numel())) == 0;
}

}  // namespace

TEST_CASE("train: config takes registered optimizer and schedule names with their options") {
  Registered registered;
  const Config c = parse_config(kConfig, "t.toml");
  CHECK(c.optim.name == "test_lion");
  CHECK(option_real(c.optim.options, "beta1") == 0.95);
  CHECK(option_real(c.optim.options, "beta2") == 0.99);  // the default, filled in
  CHECK(option_real(c.schedule.options, "final_fraction") == 0.0);
  // Written back and read again: the same config.
  const std::string toml = to_toml(c);
  CHECK(toml.find("[optim.options]\nbeta1 = 0.95\nbeta2 = 0.99\n") != std::string::npos);
  CHECK(to_toml(parse_config(toml, "r.toml")) == toml);
  // --set into the tables.
  const Config set = parse_config(
      kConfig, "t.toml", V{"optim.options.beta2=0.9", "schedule.options.final_fraction=0.1"});
  CHECK(option_real(set.optim.options, "beta2") == 0.9);
  CHECK(option_real(set.schedule.options, "final_fraction") == 0.1);
  CHECK(config_differences(c, set) ==
        V{"optim.options.beta2: 0.99 (checkpoint) vs 0.9 (config)",
          "schedule.options.final_fraction: 0.0 (checkpoint) vs 0.1 (config)"});
  // Switching the optimizer by --set drops the file's table, which was the old one's.
  const Config adam = parse_config(kConfig, "t.toml", V{"optim.name=adam"});
  CHECK(adam.optim.options.empty());
}

TEST_CASE("train: config refuses unknown names and bad options in one line with the position") {
  Registered registered;
  std::string text = kConfig;
  CHECK(error_of(text, V{"optim.options.beta1=1.5"}) ==
        "--set optim.options.beta1=1.5: optim.options.beta1 = 1.5 is out of range: expected a "
        "number in [0.0, 1.0)");
  CHECK(
      error_of(text, V{"optim.options.beta1=high"})
          .starts_with(
              "--set optim.options.beta1=high: optim.options.beta1 has type string but expected"));
  text.replace(text.find("beta1 = 0.95"), 12, "bta1 = 0.95");
  CHECK(error_of(text) ==
        "t.toml:9:1: unknown key optim.options.bta1 (did you mean "
        "optim.options.beta1?)");
  CHECK(error_of(kConfig, V{"optim.name=lamb"}) ==
        "--set optim.name=lamb: optim.name = \"lamb\" is not one of the registered optimizers "
        "\"adam\", \"adamw\", \"sgd\", \"test_lion\" (a plugin's optimizer needs --plugin PATH or "
        "runtime.plugins)");
  CHECK(error_of(kConfig, V{"schedule.name=test_lineer"}).find("(did you mean \"test_linear\"?)") !=
        std::string::npos);
  CHECK(
      error_of(kConfig, V{"optim.name=adam", "optim.options.beta1=0.9"}) ==
      "--set optim.options.beta1=0.9: unknown key optim.options.beta1 (this table takes no keys)");
  CHECK(error_of(kConfig, V{"optim.options=3"})
            .starts_with("--set optim.options=3: optim.options is a table of optimizer options"));
  CHECK(error_of(kConfig, V{"optim.lr_scale.emb=-1"}) ==
        "--set optim.lr_scale.emb=-1: optim.lr_scale.\"emb\" = -1.0 is out of range: expected a "
        "finite number >= 0.0");
}

TEST_CASE("train: the memory estimate counts the optimizer's declared state tensors") {
  Registered registered;
  const Config adam = tiny({});
  const Config lion = tiny({"optim.name=test_lion"});
  const Config sgd = tiny({"optim.name=sgd"});
  const Config momentum = tiny({"optim.name=sgd", "optim.momentum=0.9"});
  const double p = static_cast<double>(estimate_memory(adam).parameters);
  CHECK(estimate_memory(adam).optimizer_bytes == 4 * 2 * p);
  CHECK(estimate_memory(lion).optimizer_bytes == 4 * 1 * p);
  CHECK(estimate_memory(sgd).optimizer_bytes == 0);
  CHECK(estimate_memory(momentum).optimizer_bytes == 4 * 1 * p);
}

TEST_CASE("train: a registered optimizer and schedule with parameter groups resume bit for bit") {
  Registered registered;
  const V sets = {"optim.name=test_lion",
                  "optim.lr=1e-3",
                  "optim.weight_decay=0.1",
                  "optim.no_decay=*.bias,*norm*",
                  "optim.lr_scale={\"embeddings.*\" = 0.5}",
                  "optim.options.beta1=0.95",
                  "schedule.name=test_linear",
                  "schedule.options.final_fraction=0.1",
                  "train.steps=20",
                  "train.checkpoint_every=1000",
                  "train.eval_every=0",
                  "model.dropout=0.1"};
  testing::TempDir dir("headlab-optim-registry");
  Trainer straight(tiny(sets), dir.path / "straight");
  straight.run();

  struct StopAt : TrainObserver {
    int64_t last = 0;
    void on_step(const StepMetrics& m) override { last = m.step; }
    bool should_stop() override { return last >= 10; }
  } stop;
  {
    Trainer first(tiny(sets), dir.path / "resumed");
    CHECK(first.run(&stop).interrupted);
  }
  const fs::path checkpoint = *latest_checkpoint(dir.path / "resumed");
  CHECK(checkpoint.filename() == "step-000010");
  Trainer second(tiny(sets), dir.path / "resumed");
  second.resume();
  CHECK(second.step() == 10);
  second.run();

  const StateDict oa = straight.optimizer().state_dict(), ob = second.optimizer().state_dict();
  REQUIRE(oa.size() == ob.size());
  CHECK(oa.front().name.starts_with("exp_avg."));  // Lion's one slot
  for (size_t i = 0; i < oa.size(); ++i)
    CHECK_MESSAGE(bitwise_equal(oa[i].tensor, ob[i].tensor), oa[i].name);
  const StateDict wa = straight.model().state_dict(), wb = second.model().state_dict();
  REQUIRE(wa.size() == wb.size());
  for (size_t i = 0; i < wa.size(); ++i)
    CHECK_MESSAGE(bitwise_equal(wa[i].tensor, wb[i].tensor), wa[i].name);
  // The groups applied: biases and norms undecayed, the embeddings at half the rate.
  const std::vector<ParameterGroup>& groups = straight.optimizer().parameter_groups();
  const NamedParameters& params = straight.optimizer().parameters();
  int undecayed = 0, scaled = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    undecayed += !groups[i].weight_decay;
    if (params[i].name.starts_with("embeddings.")) CHECK(groups[i].lr_scale == 0.5);
    scaled += groups[i].lr_scale == 0.5;
  }
  CHECK(undecayed > 0);
  CHECK(scaled > 0);
}
