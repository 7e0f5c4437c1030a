// A distributed sweep's run directories brought to rank 0 (train/sweep/gather_runs.h), with
// ranks as threads whose "hosts" are separate directories: every rank names run i by a path
// under its own host, as ranks without a shared filesystem do.

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "tests/temp_dir.h"
#include "tests/train/thread_comm.h"
#include "train/sweep/gather_runs.h"

using namespace headlab;
using headlab::testing::TempDir;
namespace fs = std::filesystem;

namespace {

void write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

// A run directory as a trained run leaves it: files, a checkpoint directory, `latest` a link.
void make_run(const fs::path& dir, const std::string& id) {
  write(dir / "run.json", "{\"run\": \"" + id + "\"}\n");
  write(dir / "summary.json", "{\"eval_accuracy\": 0.5}\n");
  write(dir / "checkpoints" / "step-000020" / "model.safetensors", std::string("\0\1\2", 3) + id);
  fs::create_symlink("step-000020", dir / "checkpoints" / "latest");
}

std::vector<SweepRun> runs_on(const fs::path& host, int count) {
  std::vector<SweepRun> runs(count);
  for (int i = 0; i < count; ++i) runs[i].dir = host / "sweep" / ("run-" + std::to_string(i));
  return runs;
}

// Two ranks, each trains run `rank` on its own host, then they gather: each rank's error, "" when
// it had none.
std::vector<std::string> gather_two(const std::function<fs::path(int)>& host) {
  std::vector<std::string> errors(2);
  testing::run_ranks(2, [&](Comm& comm) {
    const std::vector<SweepRun> runs = runs_on(host(comm.rank()), 2);
    make_run(runs[comm.rank()].dir, std::to_string(comm.rank()));
    try {
      gather_run_dirs(comm, runs);
    } catch (const Error& e) {
      errors[comm.rank()] = e.what();
    }
  });
  return errors;
}

}  // namespace

TEST_CASE("train: a sweep's run directories from other ranks' hosts land whole on rank 0's") {
  TempDir tmp("gather-runs");
  const int ranks = 3, count = 5;
  auto host = [&](int r) { return tmp.path / ("host" + std::to_string(r)); };
  // Run 4 (rank 1's) is also on rank 0's host, the same run: a shared directory.
  make_run(runs_on(host(0), count)[4].dir, "4");
  std::vector<int> received(ranks, -1);
  testing::run_ranks(ranks, [&](Comm& comm) {
    const std::vector<SweepRun> runs = runs_on(host(comm.rank()), count);
    for (int i = comm.rank(); i < count; i += ranks) make_run(runs[i].dir, std::to_string(i));
    received[comm.rank()] = gather_run_dirs(comm, runs);
  });
  CHECK(received == std::vector<int>{2, 0, 0});  // runs 1 and 2; 4 was there
  const std::vector<SweepRun> on_0 = runs_on(host(0), count);
  for (int i = 0; i < count; ++i) {
    CAPTURE(i);
    const fs::path owner = runs_on(host(i % ranks), count)[i].dir;
    CHECK(pack_tree(on_0[i].dir) == pack_tree(owner));
    CHECK(fs::is_symlink(on_0[i].dir / "checkpoints" / "latest"));
    CHECK(fs::read_symlink(on_0[i].dir / "checkpoints" / "latest") == "step-000020");
  }
  CHECK_FALSE(fs::exists(host(1) / "sweep" / "run-0"));  // nothing goes the other way
  for (const auto& e : fs::directory_iterator(host(0) / "sweep"))
    CHECK_MESSAGE(e.path().filename().string().rfind(".", 0) != 0, e.path());  // no leftovers
}

TEST_CASE("train: a run directory on rank 0's host holding another run is never replaced") {
  TempDir tmp("gather-runs-conflict");
  auto host = [&](int r) { return tmp.path / ("host" + std::to_string(r)); };
  make_run(runs_on(host(0), 2)[1].dir, "someone else's");
  const std::vector<std::string> errors = gather_two(host);
  for (const std::string& e : errors) {
    CHECK_MESSAGE(e.find("holds another run than the one rank 1 trained") != std::string::npos, e);
    CHECK_MESSAGE(e.find("run-1") != std::string::npos, e);
  }
  std::ifstream in(runs_on(host(0), 2)[1].dir / "run.json");
  CHECK(std::string(std::istreambuf_iterator<char>(in), {}).find("someone else") !=
        std::string::npos);
}

TEST_CASE("train: a packed run directory is refused when it names a path outside") {
  TempDir tmp("gather-runs-pack");
  make_run(tmp.path / "run", "x");
  const std::string packed = pack_tree(tmp.path / "run");
  unpack_tree(packed, tmp.path / "copy");
  CHECK(pack_tree(tmp.path / "copy") == packed);
  CHECK_THROWS_WITH_AS(unpack_tree(packed, tmp.path / "copy"), doctest::Contains("it exists"),
                       Error);
  // One directory entry "../evil".
  std::string evil(1, 'd');
  const uint64_t n = 7, zero = 0;
  evil.append(reinterpret_cast<const char*>(&n), 8);
  evil += "../evil";
  evil.append(reinterpret_cast<const char*>(&zero), 8);
  CHECK_THROWS_WITH_AS(unpack_tree(evil, tmp.path / "evil-copy"),
                       doctest::Contains("outside the directory"), Error);
  CHECK_FALSE(fs::exists(tmp.path / "evil"));
  CHECK_THROWS_WITH_AS(unpack_tree(packed.substr(0, packed.size() - 3), tmp.path / "short"),
                       doctest::Contains("cut short"), Error);
}

TEST_CASE("train: a stale incoming directory on rank 0's host is refused and left as it is") {
  TempDir tmp("gather-runs-stale");
  auto host = [&](int r) { return tmp.path / ("host" + std::to_string(r)); };
  const fs::path stale = host(0) / "sweep" / ".run-1.incoming";
  write(stale / "mine.txt", "not headlab's");
  const std::vector<std::string> errors = gather_two(host);
  for (const std::string& e : errors) CHECK_MESSAGE(e.find("it exists") != std::string::npos, e);
  CHECK(fs::exists(stale / "mine.txt"));
  CHECK_FALSE(fs::exists(host(0) / "sweep" / "run-1"));
}
