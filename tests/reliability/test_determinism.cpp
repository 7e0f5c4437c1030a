// Determinism: the same config and seed on the same machine and thread count gives bit-identical
// metrics (losses, accuracies, gradient norms, learning rates, evaluations; timing fields
// aside) and bit-identical final weights and optimizer state.

#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/reliability/process.h"
#include "tests/reliability/run_dir.h"

using namespace headlab::testing;
namespace fs = std::filesystem;

TEST_CASE("train: determinism same config and seed give identical metrics and weights") {
  const fs::path config = source_dir() / "tests" / "reliability" / "crash.toml";
  TempDir tmp("determinism");
  for (const char* threads : {"1", "2"}) {
    CAPTURE(threads);
    std::vector<fs::path> runs;
    for (int i = 0; i < 2; ++i) {
      runs.push_back(tmp / (std::string("threads-") + threads + "-" + std::to_string(i)));
      const RunResult r =
          run_cli({"train", config.string(), "--out", runs.back().string(), "--no-progress",
                   "--no-analysis", "--set", std::string("runtime.threads=") + threads});
      REQUIRE_MESSAGE(r.exit_code == 0, r.describe());
    }
    const std::string metrics = metrics_without_timing(runs[0] / "metrics.jsonl");
    CHECK(metrics.find("\"grad_norm\"") != std::string::npos);
    CHECK(metrics == metrics_without_timing(runs[1] / "metrics.jsonl"));
    for (const char* file : {"model.safetensors", "optimizer.safetensors"}) {
      CAPTURE(file);
      CHECK(tensors_of(runs[0] / "checkpoints" / "latest" / file) ==
            tensors_of(runs[1] / "checkpoints" / "latest" / file));
    }
    auto summary = [](const fs::path& run) {
      nlohmann::json s = nlohmann::json::parse(read_bytes(run / "summary.json"));
      return s["eval_loss"].dump() + " " + s["eval_accuracy"].dump() + " " +
             s["final_loss"].dump() + " " + s["threads"].dump();
    };
    CHECK(summary(runs[0]) == summary(runs[1]));
  }
}
