#pragma once
// What the CLI prints for a person (everything but a command's results on stdout) goes through
// Output: notes and progress on stderr, and, once a run or sweep directory is claimed, the same
// as plain lines in its log (train.log, sweep.log). spdlog's default logger writes here too.
//
// A write to stderr that fails (a closed pipe: `headlab train ... 2>&1 | head -n 3`, a full
// disk) stops the terminal output, not the command; it is remembered and main() turns it into a
// non-zero exit at the end. The same for the log file, whose first error is kept for the
// message. --quiet keeps stderr to the final line (the error or the interrupt).

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace headlab::cli {

class Output {
 public:
  static Output& get();

  void set_quiet(bool quiet) { quiet_ = quiet; }
  bool quiet() const { return quiet_; }
  // Appends from now on to `path` (created if needed; never through a link).
  void open_log(const std::filesystem::path& path);
  void close_log();

  // A line with a time stamp ("[12:34:56] text") on stderr (unless quiet) and in the log.
  void note(std::string_view text);
  // The same line in the log only (what a progress bar shows on the terminal).
  void log_only(std::string_view text);
  // Raw text for the terminal only (the progress bar), unless quiet.
  void terminal(std::string_view raw);
  // The command's last line ("headlab: error: ...", "headlab: interrupted ..."): on stderr
  // always, and in the log.
  void final_line(std::string_view line);
  // Lines of a command's results that also belong in the log (the summary after training).
  void log_lines(std::string_view text);

  bool stderr_failed() const { return stderr_failed_; }
  // The first failed write to the log: "cannot write 'runs/x/train.log': No space left on device".
  const std::optional<std::string>& log_error() const { return log_error_; }

 private:
  Output() = default;
  void to_stderr(std::string_view text);
  void to_log(std::string_view text);

  bool quiet_ = false;
  bool stderr_failed_ = false;
  int log_fd_ = -1;
  std::filesystem::path log_path_;
  std::optional<std::string> log_error_;
};

// "[12:34:56] " of the local time.
std::string time_stamp();
// Routes spdlog's default logger to Output::note.
void use_output_logger();

}  // namespace headlab::cli
