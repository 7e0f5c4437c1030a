#pragma once
// The case manifests of the reliability tests (tests/hostile/**/cases.txt) and the promise a
// refused command keeps.

#include <filesystem>
#include <string>
#include <vector>

#include "tests/reliability/process.h"

namespace headlab::testing {

inline constexpr double kCaseTimeout = 120;    // seconds; a hang is a failure, not a slow pass
inline constexpr size_t kMaxErrorLine = 1200;  // the CLI shortens long messages to about 1000
inline constexpr long kMaxRssKb = 1L << 20;    // 1 GiB

std::string trim(const std::string& s);
// Splits "a | b | c" into trimmed fields (no field holds a '|').
std::vector<std::string> fields(const std::string& line);
// The lines of a manifest that are cases (not blank, not comments).
std::vector<std::string> case_lines(const std::filesystem::path& manifest);

// What a refused command must show: no hang, no signal, exit 2, exactly one stderr line
// "headlab: error: ..." holding `fragment`, nothing on stdout, bounded memory. Returns "" or what
// went wrong. check_stdout = false when stdout went elsewhere.
std::string check_rejected(const RunResult& r, const std::string& fragment,
                           bool check_stdout = true);
// No hang, no signal, bounded memory: "" or what went wrong.
std::string check_ended(const RunResult& r);

// HEADLAB_HOSTILE_PRINT=1 prints every error line, to review the messages themselves.
void show(const std::string& name, const RunResult& r);

}  // namespace headlab::testing
