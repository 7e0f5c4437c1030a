#pragma once
// Helpers shared by the analysis, report and sweep tests: TempDir (tests/temp_dir.h), running
// a shell command, and a tag-balance check for the generated HTML (the browser test is
// tests/train/report_browser.py).

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/temp_dir.h"

namespace headlab::analysis_test {

namespace fs = std::filesystem;

using testing::TempDir;

inline std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct CommandResult {
  int code = -1;       // exit status
  std::string output;  // stdout (stderr too when the command redirects it)
};

inline CommandResult run_command(const std::string& command) {
  CommandResult r;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) return r;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) r.output.append(buf.data(), n);
  const int status = ::pclose(pipe);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

inline bool python_numpy_available() {
  return ::access("/usr/bin/python3", X_OK) == 0 &&
         std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") == 0;
}

// Checks that every element is closed in order (HTML void elements and self-closing "/>"
// excepted), skipping the contents of <style> and <script>. Returns "" when balanced, else a
// description of the first problem.
inline std::string check_tags(const std::string& html) {
  static const std::vector<std::string> kVoid = {"meta", "link", "br",   "hr",  "img",   "input",
                                                 "col",  "area", "base", "wbr", "source"};
  std::vector<std::string> stack;
  size_t i = 0;
  while ((i = html.find('<', i)) != std::string::npos) {
    if (html.compare(i, 4, "<!--") == 0) {
      i = html.find("-->", i);
      if (i == std::string::npos) return "unterminated comment";
      continue;
    }
    const size_t end = html.find('>', i);
    if (end == std::string::npos) return "unterminated tag at " + std::to_string(i);
    std::string tag = html.substr(i + 1, end - i - 1);
    i = end + 1;
    if (tag.empty() || tag[0] == '!') continue;  // <!DOCTYPE html>
    const bool closing = tag[0] == '/';
    const bool self_closing = tag.back() == '/';
    std::string name;
    for (size_t k = closing ? 1 : 0;
         k < tag.size() && (std::isalnum(static_cast<unsigned char>(tag[k])) || tag[k] == '-'); ++k)
      name += static_cast<char>(std::tolower(static_cast<unsigned char>(tag[k])));
    if (name.empty()) return "bad tag <" + tag + ">";
    if (closing) {
      if (stack.empty() || stack.back() != name) {
        return "</" + name + "> closes <" +
               (stack.empty() ? std::string("nothing") : stack.back()) + ">";
      }
      stack.pop_back();
    } else if (!self_closing && std::find(kVoid.begin(), kVoid.end(), name) == kVoid.end()) {
      stack.push_back(name);
      if (name == "style" || name == "script") {  // CSS and JavaScript may hold '<' and '>'
        const size_t close = html.find("</" + name + ">", i);
        if (close == std::string::npos) return "unterminated <" + name + ">";
        i = close;
      }
    }
  }
  if (!stack.empty()) return "<" + stack.back() + "> is never closed";
  return "";
}

// The text of <section id="id"> ... </section>, or "" when absent.
inline std::string section(const std::string& html, const std::string& id) {
  const size_t a = html.find("<section id=\"" + id + "\">");
  if (a == std::string::npos) return "";
  const size_t b = html.find("</section>", a);
  return b == std::string::npos ? "" : html.substr(a, b - a);
}

}  // namespace headlab::analysis_test
