#pragma once
// A fresh, empty directory under the system temp dir for one test; removed with everything in
// it when the test ends (permissions restored first, for tests that revoke them).

#include <unistd.h>

#include <filesystem>
#include <string_view>
#include <system_error>

#include <fmt/format.h>

namespace headlab::testing {

struct TempDir {
  std::filesystem::path path;

  explicit TempDir(std::string_view prefix = "headlab-test") {
    static int counter = 0;
    path = std::filesystem::temp_directory_path() /
           fmt::format("{}-{}-{}", prefix, ::getpid(), counter++);
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::permissions(path, std::filesystem::perms::owner_all,
                                 std::filesystem::perm_options::add, ignored);
    std::filesystem::remove_all(path, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

}  // namespace headlab::testing
