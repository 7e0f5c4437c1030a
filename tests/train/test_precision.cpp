// runtime.precision: the key and its checks (every CPU), and where the CPU has AVX512_BF16, a
// bf16 run that differs from fp32, is deterministic and resumes bit-identically.

#include <doctest/doctest.h>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/kernels/kernels.h"
#include "layers/encoder.h"
#include "optim/optimizer.h"
#include "tests/temp_dir.h"
#include "tests/train/trainer_test_util.h"
#include "train/config/config.h"
#include "train/run/checkpoint.h"
#include "train/run/model.h"
#include "train/run/trainer.h"

using namespace headlab;
namespace fs = std::filesystem;

namespace {

using trainer_test::bitwise_equal;
using trainer_test::Recorder;
using trainer_test::tiny;

const std::string kTask = "[task]\nname = \"dependency\"\n";

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  FAIL("expected an error");
  return {};
}

// Every Trainer sets the process's precision from its config; back to fp32 afterwards.
struct Fp32After {
  ~Fp32After() { set_precision(Precision::fp32); }
};

}  // namespace

TEST_CASE("train: config runtime.precision defaults to fp32 and accepts fp32, bf16, bf16_or_fp32") {
  CHECK(parse_config(kTask, "t.toml").runtime.precision == "fp32");
  for (const char* p : {"fp32", "bf16", "bf16_or_fp32"}) {
    CAPTURE(p);
    const Config c = parse_config(kTask + "[runtime]\nprecision = \"" + p + "\"\n", "t.toml");
    CHECK(c.runtime.precision == p);
  }
  const std::string e =
      error_of([] { parse_config(kTask + "[runtime]\nprecision = \"fp16\"\n", "t.toml"); });
  CHECK_MESSAGE(e.find("runtime.precision") != std::string::npos, e);
  CHECK_MESSAGE(e.find("bf16_or_fp32") != std::string::npos, e);
  CHECK_MESSAGE(e.find("t.toml:4") != std::string::npos, e);
}

TEST_CASE("train: runtime.precision bf16 is refused without AVX512_BF16 or the onednn backend") {
  Config c = parse_config(kTask + "[runtime]\nprecision = \"bf16\"\n", "t.toml");
  CHECK(resolve_precision(parse_config(kTask, "t.toml")) == Precision::fp32);
  if (bf16_supported()) {
    CHECK(resolve_precision(c) == Precision::bf16);
  } else {
    const std::string e = error_of([&] { resolve_precision(c); });
    CHECK_MESSAGE(e.find("t.toml:4:") == 0, e);
    CHECK_MESSAGE(
        e.find("runtime.precision = \"bf16\" needs a CPU with AVX512_BF16") != std::string::npos,
        e);
    CHECK(e.find('\n') == std::string::npos);
  }
  c.runtime.backend = "blas";
  const std::string e = error_of([&] { resolve_precision(c); });
  CHECK_MESSAGE(e.find("runtime.precision = \"bf16\" needs runtime.backend") != std::string::npos,
                e);
  c.runtime.precision = "bf16_or_fp32";  // falls back where bf16 cannot run
  CHECK(resolve_precision(c) == Precision::fp32);
  c.runtime.backend = "auto";
  CHECK(resolve_precision(c) == (bf16_supported() ? Precision::bf16 : Precision::fp32));
}

TEST_CASE("train: a bf16 run differs from fp32 and resumes bit-identically (k, stop, resume k)") {
  if (!bf16_supported()) {
    MESSAGE("skipped: this CPU has no AVX512_BF16");
    return;
  }
  const Fp32After reset;
  const std::vector<std::string> sets = {"train.steps=24",     "train.checkpoint_every=1000",
                                         "train.eval_every=0", "train.log_every=1",
                                         "model.dropout=0.1",  "runtime.precision=\"bf16\""};
  testing::TempDir dir("headlab-bf16");
  Trainer straight(tiny(sets), dir.path / "straight");
  Recorder a;
  straight.run(&a);
  CHECK(current_precision() == Precision::bf16);

  std::vector<std::string> fp32_sets = sets;
  fp32_sets.back() = "runtime.precision=\"fp32\"";
  Trainer fp32(tiny(fp32_sets), dir.path / "fp32");
  Recorder f;
  fp32.run(&f);
  REQUIRE(f.steps.size() == a.steps.size());
  CHECK(f.steps.front().loss != a.steps.front().loss);  // the products really ran in bf16

  Recorder b1;
  b1.stop_at = 12;
  { Trainer(tiny(sets), dir.path / "resumed").run(&b1); }
  Trainer second(tiny(sets), dir.path / "resumed");
  second.resume();
  CHECK(second.step() == 12);
  Recorder b2;
  second.run(&b2);
  REQUIRE(a.steps.size() == 24);
  REQUIRE(b1.steps.size() == 12);
  REQUIRE(b2.steps.size() == 12);
  for (size_t i = 0; i < 24; ++i) {
    const StepMetrics& s = i < 12 ? b1.steps[i] : b2.steps[i - 12];
    CHECK(s.loss == a.steps[i].loss);  // exact
    CHECK(s.grad_norm == a.steps[i].grad_norm);
  }
  const StateDict wa = straight.model().state_dict(), wb = second.model().state_dict();
  REQUIRE(wa.size() == wb.size());
  for (size_t i = 0; i < wa.size(); ++i)
    CHECK_MESSAGE(bitwise_equal(wa[i].tensor, wb[i].tensor), wa[i].name);

  // The precision is part of the run: resuming it in fp32 is refused.
  Trainer other(tiny(fp32_sets), dir.path / "resumed");
  const std::string e = error_of([&] { other.resume(); });
  CHECK_MESSAGE(e.find("runtime.precision") != std::string::npos, e);
}
