// model.dropout_steps (early dropout): the model's dropout acts in the first steps only. A run
// with it takes the same steps as one with dropout throughout until the switch, another step
// after it, and resumes bit-identically from either side of the switch.

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "tests/temp_dir.h"
#include "tests/train/trainer_test_util.h"
#include "train/config/config.h"
#include "train/run/trainer.h"

using namespace headlab;

namespace {

using trainer_test::Recorder;
using trainer_test::tiny;

std::vector<StepMetrics> train(const Config& c, const std::filesystem::path& dir,
                               int64_t stop_at = -1, bool resume = false) {
  Trainer t(c, dir);
  if (resume) t.resume();
  Recorder r;
  r.stop_at = stop_at;
  t.run(&r);
  return r.steps;
}

}  // namespace

TEST_CASE(
    "train: model.dropout_steps drops in the first steps only, and resumes across the switch") {
  const std::vector<std::string> base = {
      "train.steps=12",        "schedule.warmup_steps=4", "train.checkpoint_every=1000",
      "train.eval_every=0",    "train.log_every=1",       "model.dropout=0.2",
      "model.attn_dropout=0.3"};
  std::vector<std::string> early = base;
  early.push_back("model.dropout_steps=5");
  testing::TempDir dir("headlab-early-dropout");
  const std::vector<StepMetrics> always = train(tiny(base), dir.path / "always");
  const std::vector<StepMetrics> straight = train(tiny(early), dir.path / "early");
  REQUIRE(always.size() == 12);
  REQUIRE(straight.size() == 12);
  for (size_t i = 0; i < 5; ++i) CHECK(straight[i].loss == always[i].loss);  // steps 1..5 alike
  // The same weights after step 5, but step 6 drops nothing: another loss.
  CHECK(straight[5].loss != always[5].loss);

  for (int64_t stop : {3, 8}) {  // resumed before the switch, and after it
    CAPTURE(stop);
    const std::filesystem::path run = dir.path / ("resumed-" + std::to_string(stop));
    const std::vector<StepMetrics> first = train(tiny(early), run, stop);
    const std::vector<StepMetrics> rest = train(tiny(early), run, -1, true);
    REQUIRE(first.size() + rest.size() == 12);
    for (size_t i = 0; i < 12; ++i) {
      const StepMetrics& s = i < first.size() ? first[i] : rest[i - first.size()];
      CHECK(s.loss == straight[i].loss);  // exact
      CHECK(s.grad_norm == straight[i].grad_norm);
    }
  }
}
