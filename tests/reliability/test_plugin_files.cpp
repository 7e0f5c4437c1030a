// Plugin files that dlopen must never see (train/plugins/elf_check.h): a real plugin of the test
// build cut at several lengths (dlopen maps such a file past its end and the process died of
// SIGBUS), a sparse 5 GiB file (refused by its size, before it is hashed), files that are not
// ELF, and ELF headers of another machine, class or type. Each goes through every way a plugin
// reaches the loader: --plugin of info, train, sweep and gradcheck, and runtime.plugins in a
// config. Each must be refused like a hostile command line (exit 2, one line naming the plugin
// and the cause, nothing created), quickly.

#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "tests/reliability/cases.h"
#include "tests/reliability/process.h"
#include "tests/reliability/run_dir.h"

using namespace headlab::testing;
namespace fs = std::filesystem;

namespace {

const fs::path kPlugin = fs::path(HEADLAB_TEST_PLUGIN_DIR) / "libheadlab_example_plugin.so";

struct BadPlugin {
  std::string name;
  std::string fragment;  // of the error line, after "plugin '<path>': "
};

// A copy of `bytes` with the `width` little-endian bytes at `offset` set to `value`.
std::string patched(std::string bytes, size_t offset, uint64_t value, size_t width) {
  for (size_t i = 0; i < width; ++i)
    bytes[offset + i] = static_cast<char>((value >> (8 * i)) & 0xff);
  return bytes;
}

}  // namespace

TEST_CASE("train: hostile plugin files are refused before dlopen") {
  const std::string good = read_bytes(kPlugin);
  REQUIRE(good.size() > 40000);  // the cuts below lie inside it
  REQUIRE(good.compare(0, 4,
                       "\x7f"
                       "ELF") == 0);
  TempDir tmp("hostile-plugins");
  const fs::path files = tmp / "files";
  fs::create_directories(files);
  std::vector<BadPlugin> bad;
  for (size_t cut : {size_t{0}, size_t{3}, size_t{64}, size_t{1000}, size_t{5000}, size_t{20000},
                     good.size() / 2, good.size() - 1}) {
    const std::string name = "cut-" + std::to_string(cut) + ".so";
    write_bytes(files / name, good.substr(0, cut));
    // Fewer than 4 bytes cannot show the magic; 64 bytes are the header without its tables.
    bad.push_back({name, cut < 4 ? "it is not an ELF file" : "a truncated file?"});
  }
  // Without a section header table (e_shoff 0, as a stripped file may be): the segments' own
  // file ranges show the cut.
  for (size_t cut : {size_t{1000}, size_t{20000}}) {
    const std::string name = "no-sections-cut-" + std::to_string(cut) + ".so";
    write_bytes(files / name, patched(good, 40, 0, 8).substr(0, cut));
    bad.push_back({name, "(PT_LOAD) needs bytes"});
  }
  write_bytes(files / "text.so", "not a shared library\n");
  bad.push_back({"text.so", "cannot be loaded as a shared library: it is not an ELF file"});
  // e_machine (offset 18): AArch64 here, x86-64 on an AArch64 build.
  const unsigned other = good[18] == 62 ? 183 : 62;
  write_bytes(files / "machine.so", patched(good, 18, other, 2));
  bad.push_back({"machine.so", "it is built for"});
  write_bytes(files / "class.so", patched(good, 4, 1, 1));  // EI_CLASS: ELFCLASS32
  bad.push_back({"class.so", "it is a 32-bit ELF file, but this headlab is 64-bit"});
  write_bytes(files / "endian.so", patched(good, 5, 2, 1));  // EI_DATA: big-endian
  bad.push_back({"endian.so", "its byte order is big-endian"});
  write_bytes(files / "exec.so", patched(good, 16, 2, 2));  // e_type: ET_EXEC
  bad.push_back({"exec.so", "it is an executable (ET_EXEC), not a shared library (ET_DYN)"});
  // A sparse 5 GiB file: refused by its size at once (hashing it took half a minute).
  write_bytes(files / "huge.so", good);
  fs::resize_file(files / "huge.so", uintmax_t{5} << 30);
  bad.push_back({"huge.so", "it is 5368709120 bytes, more than the 1073741824 bytes (1 GiB)"});

  // The good plugin loads (the checks refuse only what they should).
  const RunResult ok = run_cli({"info", "--plugin", kPlugin.string()});
  REQUIRE_MESSAGE(ok.exit_code == 0, ok.describe());
  CHECK(ok.out.find("plugins: 1") != std::string::npos);

  int index = 0, runs = 0;
  for (const BadPlugin& b : bad) {
    const std::string path = (files / b.name).string();
    const std::string out = (tmp / ("out-" + std::to_string(index++))).string();
    const std::vector<std::vector<std::string>> commands = {
        {"info", "--plugin", path},
        {"gradcheck", "--plugin", path, "--only", "softmax"},
        {"train", "configs/tiny.toml", "--out", out, "--plugin", path},
        {"train", "configs/tiny.toml", "--out", out, "--set", "runtime.plugins=[\"" + path + "\"]"},
        {"sweep", "configs/tiny.toml", "--out", out, "--over", "model.heads=4", "--plugin", path},
    };
    for (const auto& args : commands) {
      const Snapshot before = snapshot(tmp.path());
      RunOptions o;
      o.timeout_seconds = kCaseTimeout;
      const RunResult r = run_cli(args, o);
      ++runs;
      const std::string what = b.name + " (" + args[0] + " " + args[args.size() - 2] + ")";
      show(what, r);
      const std::string problem = check_rejected(r, "plugin '" + path + "': ");
      CHECK_MESSAGE(problem.empty(), what << ": " << problem << "\n" << r.describe());
      CHECK_MESSAGE(r.err.find(b.fragment) != std::string::npos, what << ": expected '"
                                                                      << b.fragment << "'\n"
                                                                      << r.describe());
      CHECK_MESSAGE(r.seconds < 20, what << " took " << r.seconds << " s");
      const std::string changed = snapshot_diff(before, snapshot(tmp.path()));
      CHECK_MESSAGE(changed.empty(), what << ": changed the file system:\n" << changed);
    }
  }
  MESSAGE(bad.size() << " bad plugin files, " << runs << " runs of the CLI");
}
