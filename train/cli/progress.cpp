#include "train/cli/progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <string>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "train/cli/output.h"
#include "train/cli/signals.h"

namespace headlab::cli {
namespace {

std::string format_duration(double seconds) {
  if (!(seconds >= 0) || seconds > 1e7) return "--:--";
  const auto s = static_cast<int64_t>(seconds + 0.5);
  if (s >= 3600) return fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
  return fmt::format("{}:{:02}", s / 60, s % 60);
}

int terminal_width() {
  winsize w{};
  if (ioctl(STDERR_FILENO, TIOCGWINSZ, &w) == 0 && w.ws_col > 20) return w.ws_col;
  return 80;
}

}  // namespace

bool stderr_is_tty() {
  return isatty(STDERR_FILENO) == 1;
}

void ProgressReporter::on_start(int64_t start_step, int64_t total_steps, int64_t parameters) {
  start_ = Clock::now();
  start_step_ = start_step;
  total_steps_ = total_steps;
  if (start_step > 0)
    spdlog::info("resuming at step {} of {} ({} parameters)", start_step, total_steps, parameters);
  else
    spdlog::info("training {} steps ({} parameters)", total_steps, parameters);
}

double ProgressReporter::eta_seconds(int64_t step) const {
  const int64_t done = step - start_step_;
  if (done <= 0) return -1;
  const double spent = std::chrono::duration<double>(Clock::now() - start_).count();
  return spent / static_cast<double>(done) * static_cast<double>(total_steps_ - step);
}

void ProgressReporter::on_step(const StepMetrics& m) {
  if (!bar_) return;
  const Clock::time_point now = Clock::now();
  if (m.step != m.total_steps && line_open_ && now - last_draw_ < std::chrono::milliseconds(100))
    return;
  last_draw_ = now;
  draw(m);
}

void ProgressReporter::draw(const StepMetrics& m) {
  std::string text =
      fmt::format(" {}/{} loss {:.4f} acc {:.3f}", m.step, m.total_steps, m.loss, m.accuracy);
  if (last_eval_accuracy_ >= 0) text += fmt::format(" eval {:.3f}", last_eval_accuracy_);
  text += " eta " + format_duration(eta_seconds(m.step));
  const int width = terminal_width() - 1;
  const int bar = std::min(30, width - static_cast<int>(text.size()) - 2);
  std::string line;
  if (bar >= 5) {
    const int filled = static_cast<int>(static_cast<double>(bar) * static_cast<double>(m.step) /
                                        static_cast<double>(std::max<int64_t>(1, m.total_steps)));
    line = fmt::format("[{}{}]", std::string(filled, '#'), std::string(bar - filled, '-'));
  }
  line += text;
  if (static_cast<int>(line.size()) > width) line.resize(width);
  Output::get().terminal("\r" + line + "\033[K");
  line_open_ = true;
}

void ProgressReporter::clear_line() {
  if (!line_open_) return;
  Output::get().terminal("\r\033[K");
  line_open_ = false;
}

bool ProgressReporter::should_stop() {
  return stop_signal() != 0;
}

void ProgressReporter::on_log(const StepMetrics& m) {
  const std::string line = fmt::format(
      "step {}/{}  loss {:.4f}  acc {:.4f}  lr {:.3g}  grad_norm {:.3g}  {:.0f} tok/s  eta {}",
      m.step, m.total_steps, m.loss, m.accuracy, m.lr, m.grad_norm, m.tokens_per_second,
      format_duration(eta_seconds(m.step)));
  if (bar_)
    Output::get().log_only(line);
  else
    spdlog::info("{}", line);
}

void ProgressReporter::on_eval(const EvalMetrics& e) {
  last_eval_accuracy_ = e.accuracy;
  std::string components;
  for (size_t r = 0; r < e.relations.size() && r < e.relation_accuracy.size(); ++r)
    components += fmt::format("{}{} {:.3f}", r ? ", " : "", e.relations[r], e.relation_accuracy[r]);
  if (e.step == total_steps_)
    finish();  // keep the finished bar
  else
    clear_line();
  spdlog::info("eval step {}: accuracy {:.4f}  loss {:.4f}{}", e.step, e.accuracy, e.loss,
               components.empty() ? "" : "  (" + components + ")");
}

void ProgressReporter::on_checkpoint(int64_t step, const std::filesystem::path& dir) {
  const std::string line = fmt::format("checkpoint at step {}: {}", step, dir.string());
  if (bar_)
    Output::get().log_only(line);
  else
    spdlog::info("{}", line);
}

void ProgressReporter::finish() {
  if (!line_open_) return;
  Output::get().terminal("\n");
  line_open_ = false;
}

}  // namespace headlab::cli
