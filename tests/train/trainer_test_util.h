#pragma once
// What the trainer's tests share: configs/tiny.toml with --set overrides, an observer that
// records the run's steps and evaluations (and can stop it), and a bit-for-bit tensor compare.

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "train/config/config.h"
#include "train/run/trainer.h"

namespace headlab::trainer_test {

inline Config tiny(std::vector<std::string> sets = {}) {
  return load_config(std::string(HEADLAB_SOURCE_DIR) + "/configs/tiny.toml", sets);
}

// Records every step's and evaluation's metrics; asks the trainer to stop after step
// `stop_at` (if set).
struct Recorder : TrainObserver {
  int64_t stop_at = -1;
  std::vector<StepMetrics> steps;
  std::vector<EvalMetrics> evals;
  void on_step(const StepMetrics& m) override { steps.push_back(m); }
  void on_eval(const EvalMetrics& e) override { evals.push_back(e); }
  bool should_stop() override { return stop_at >= 0 && steps.back().step >= stop_at; }
};

inline bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() &&
         std::memcmp(a.data(), b.data(), sizeof(float) * static_cast<size_t>(a.numel())) == 0;
}

}  // namespace headlab::trainer_test
