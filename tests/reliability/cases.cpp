#include "tests/reliability/cases.h"

#include <doctest/doctest.h>

#include <cstdlib>
#include <sstream>

#include "tests/reliability/run_dir.h"

namespace headlab::testing {

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

std::vector<std::string> fields(const std::string& line) {
  std::vector<std::string> out;
  std::istringstream in(line);
  for (std::string f; std::getline(in, f, '|');) out.push_back(trim(f));
  if (!line.empty() && line.back() == '|') out.push_back("");
  return out;
}

std::vector<std::string> case_lines(const std::filesystem::path& manifest) {
  std::istringstream in(read_bytes(manifest));
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line))
    if (!trim(line).empty() && trim(line)[0] != '#') lines.push_back(line);
  return lines;
}

std::string check_ended(const RunResult& r) {
  if (r.timed_out) return "did not finish in time (a hang)";
  if (r.signal) return "ended by signal " + std::to_string(r.signal);
  // Refused before allocating: a rejected input never costs a model's worth of memory (the
  // sanitizer runtime alone takes a few hundred MB of the ASan build's resident memory).
  if (r.max_rss_kb > kMaxRssKb) return "peak memory " + std::to_string(r.max_rss_kb >> 10) + " MiB";
  return "";
}

std::string check_rejected(const RunResult& r, const std::string& fragment, bool check_stdout) {
  if (std::string ended = check_ended(r); !ended.empty()) return ended;
  if (r.exit_code != 2) return "exit code " + std::to_string(r.exit_code) + ", expected 2";
  const auto lines = r.err_lines();
  if (lines.size() != 1) return std::to_string(lines.size()) + " stderr lines, expected 1";
  if (lines[0].rfind("headlab: error: ", 0) != 0) return "stderr is not 'headlab: error: ...'";
  if (lines[0].find(fragment) == std::string::npos) return "stderr lacks '" + fragment + "'";
  if (lines[0].size() > kMaxErrorLine)
    return "error line of " + std::to_string(lines[0].size()) + " characters";
  if (check_stdout && !r.out.empty()) return "wrote to stdout";
  return "";
}

void show(const std::string& name, const RunResult& r) {
  if (std::getenv("HEADLAB_HOSTILE_PRINT")) MESSAGE(name << ": " << r.err);
}

}  // namespace headlab::testing
