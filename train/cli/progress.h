#pragma once
// Progress of `headlab train` on stderr: a one-line bar (step, loss, accuracy, ETA) redrawn in
// place when stderr is a terminal, or plain lines at every metrics row, evaluation and
// checkpoint otherwise (or with --no-progress). The run's train.log gets the plain lines in
// either case (train/cli/output.h). Nothing here goes to stdout.

#include <chrono>
#include <cstdint>

#include "train/run/trainer.h"

namespace headlab::cli {

// Whether stderr is a terminal.
bool stderr_is_tty();

class ProgressReporter : public TrainObserver {
 public:
  explicit ProgressReporter(bool bar) : bar_(bar) {}
  // Asked after every step: a stop signal (train/cli/signals.h) stops the run there.
  bool should_stop() override;
  // Ends a bar line that is still open (also when training stops on an error), so the next
  // stderr line starts on a fresh line.
  ~ProgressReporter() override { finish(); }

  void on_start(int64_t start_step, int64_t total_steps, int64_t parameters) override;
  void on_step(const StepMetrics& m) override;
  void on_log(const StepMetrics& m) override;
  void on_eval(const EvalMetrics& e) override;
  void on_checkpoint(int64_t step, const std::filesystem::path& dir) override;
  void finish();

 private:
  using Clock = std::chrono::steady_clock;
  // Seconds left, from this session's pace.
  double eta_seconds(int64_t step) const;
  void draw(const StepMetrics& m);
  void clear_line();

  bool bar_;
  bool line_open_ = false;
  Clock::time_point start_{};
  Clock::time_point last_draw_{};
  int64_t start_step_ = 0;
  int64_t total_steps_ = 0;
  double last_eval_accuracy_ = -1;
};

}  // namespace headlab::cli
