#include "train/cli/options.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cstdio>
#include <limits>

#include <fmt/format.h>

#include "core/error.h"
#include "layers/option_schema.h"
#include "train/cli/job.h"
#include "train/distributed/world.h"
#include "train/io/files.h"

namespace headlab::cli {
namespace {

namespace fs = std::filesystem;

std::vector<std::string>& stored_command_line() {
  static std::vector<std::string> args;
  return args;
}

int64_t parse_int_arg(const std::string& name, const std::string& text, int64_t lo, int64_t hi) {
  int64_t v = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, v);
  const std::string expected =
      expected_text(OptionSpec::integer(static_cast<double>(lo), static_cast<double>(hi)));
  if (ec == std::errc::result_out_of_range)
    fail("{} = {} is out of range: expected {}", name, text.substr(0, 40), expected);
  if (ec != std::errc() || ptr != end || text.empty())
    fail("{} = {} is not an integer: expected {}", name, text.substr(0, 40), expected);
  if (v < lo || v > hi) fail("{} = {} is out of range: expected {}", name, v, expected);
  return v;
}

template <class Int>
CLI::Option* add_checked(CLI::App& cmd, const std::string& name, Int& value, int64_t lo, int64_t hi,
                         const std::string& doc) {
  const std::string text = fmt::format("{} (an integer in [{}, {}])", doc, lo, hi);
  return cmd
      .add_option_function<std::string>(
          name,
          [&value, name, lo, hi](const std::string& arg) {
            value = static_cast<Int>(parse_int_arg(name, arg, lo, hi));
          },
          text)
      ->type_name("N");
}

}  // namespace

CLI::Option* add_int_option(CLI::App& cmd, const std::string& name, int64_t& value, int64_t lo,
                            int64_t hi, const std::string& doc) {
  return add_checked(cmd, name, value, lo, hi, doc);
}

CLI::Option* add_int_option(CLI::App& cmd, const std::string& name, int& value, int64_t lo,
                            int64_t hi, const std::string& doc) {
  return add_checked(cmd, name, value, std::max<int64_t>(lo, std::numeric_limits<int>::min()),
                     std::min<int64_t>(hi, std::numeric_limits<int>::max()), doc);
}

void check_path_value(const std::string& name, const std::string& value,
                      const std::string& expected, size_t reserve) {
  if (value.empty()) fail("{}: the path is empty (expected {})", name, expected);
  for (const fs::path& part : fs::path(value)) {
    const std::string s = part.string();
    if (s.size() > NAME_MAX)
      fail(
          "{}: the name '{}...' in the path is {} bytes, more than the {} bytes a file name may "
          "have (NAME_MAX; expected {})",
          name, s.substr(0, 24), s.size(), NAME_MAX, expected);
  }
  const size_t length = absolute_normal_path(value).string().size();
  if (length + reserve > PATH_MAX - 1) {
    const std::string below =
        reserve > 0 ? fmt::format(", and headlab writes names of up to {} bytes below it", reserve)
                    : std::string();
    fail(
        "{}: the path is {} bytes long as an absolute path{}: more than the {} bytes a path may "
        "have (PATH_MAX; expected {})",
        name, length, below, PATH_MAX - 1, expected);
  }
}

CLI::Option* add_path_option(CLI::App& cmd, const std::string& name, std::string& value,
                             const std::string& doc, const std::string& expected, size_t reserve) {
  return cmd.add_option_function<std::string>(
      name,
      [&value, name, expected, reserve](const std::string& arg) {
        check_path_value(name, arg, expected, reserve);
        value = arg;
      },
      doc);
}

CLI::Option* add_string_option(CLI::App& cmd, const std::string& name, std::string& value,
                               const std::string& doc, const std::string& expected) {
  return cmd.add_option_function<std::string>(
      name,
      [&value, name, expected](const std::string& arg) {
        if (arg.empty()) fail("{}: the value is empty (expected {})", name, expected);
        value = arg;
      },
      doc);
}

CLI::Option* add_set_option(CLI::App& cmd, std::vector<std::string>& sets, const std::string& doc) {
  return cmd.add_option("--set", sets, doc)
      ->type_name("KEY=VALUE")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
}

namespace {
std::string memory_note_text;
}

void check_memory_now(const Config& config, MemoryUse use, int64_t examples) {
  check_memory(config, use, examples);
  const MemoryLimit limit = memory_limit(config);
  memory_note_text =
      fmt::format("; the estimate{} was {:.2f} GiB, within {}",
                  use == MemoryUse::train      ? ""
                  : use == MemoryUse::evaluate ? " of the evaluation"
                                               : " of the head analysis",
                  estimate_memory(config, use, examples).total_bytes() / (1024.0 * 1024.0 * 1024.0),
                  limit.what);
}

std::string memory_note() {
  return memory_note_text;
}

std::string exit_codes_text() {
  return "Exit codes: 0 done; 2 a mistake in the input, a file or the command line (one line "
         "\"headlab: error: ...\" on stderr), an output that cannot be written, or memory that ran "
         "out; 3 training "
         "stopped on a non-finite loss or value (the last checkpoint is kept); 128 + N stopped "
         "by signal N (130 SIGINT, 143 SIGTERM, 129 SIGHUP; a checkpoint was written); 1 an "
         "internal error (a bug: please report it).";
}

namespace {
int flush_errno = 0;
}

void flush_stdout() {
  errno = 0;
  if (std::fflush(stdout) != 0 && flush_errno == 0) flush_errno = errno ? errno : EIO;
}

int stdout_failure() {
  return flush_errno;
}

void set_command_line(int argc, char** argv) {
  stored_command_line().assign(argv, argv + argc);
}

const std::vector<std::string>& command_line() {
  return stored_command_line();
}

namespace {

bool is_control(char c) {
  const auto u = static_cast<unsigned char>(c);
  return u < 0x20 || u == 0x7f;
}

// A word with control characters as bash's $'...': \n, \t, \xNN, so that the printed command
// stays on one line, shows what the word holds and, pasted, gives back the same bytes.
std::string ansi_c_quoted(const std::string& a) {
  std::string word = "$'";
  for (char c : a) {
    if (c == '\\' || c == '\'')
      word += std::string("\\") + c;
    else if (c == '\n')
      word += "\\n";
    else if (c == '\t')
      word += "\\t";
    else if (is_control(c))
      word += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
    else
      word += c;
  }
  return word + "'";
}

}  // namespace

std::string shell_command(const std::vector<std::string>& args) {
  std::string out;
  for (const std::string& a : args) {
    const bool plain = !a.empty() && a.find_first_not_of(
                                         "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLM"
                                         "NOPQRSTUVWXYZ0123456789-_./=,:+@%") == std::string::npos;
    std::string word = "'";
    for (char c : a) word += c == '\'' ? std::string("'\\''") : std::string(1, c);
    const bool control = std::any_of(a.begin(), a.end(), is_control);
    out += (out.empty() ? "" : " ") + (plain ? a : control ? ansi_c_quoted(a) : word + "'");
  }
  return out;
}

std::string resume_command(const std::filesystem::path& out, const std::vector<std::string>& drop) {
  std::vector<std::string> args;
  bool has_resume = false, has_out = false;
  for (const std::string& a : command_line()) {
    if (std::find(drop.begin(), drop.end(), a) != drop.end()) continue;
    has_resume = has_resume || a == "--resume";
    has_out = has_out || a == "--out" || a.rfind("--out=", 0) == 0;
    args.push_back(a);
  }
  if (!has_out) args.insert(args.end(), {"--out", out.string()});
  if (!has_resume) args.push_back("--resume");
  // A job's checkpoint holds its global batch: resumed without its launcher (one rank) it would
  // be refused, so the command starts as many ranks again. The launcher's other options (a
  // hostfile, binding) are not known here; the user adds them as before.
  const std::string launcher = launcher_name();
  if (!launcher.empty() && world().size() > 1)
    args.insert(args.begin(),
                {launcher, launcher == "srun" ? "-n" : "-np", std::to_string(world().size())});
  return shell_command(args);
}

}  // namespace headlab::cli
