// A distributed sweep's run directories brought to rank 0 and, before a resume, to their
// trainers (train/sweep/gather_runs.h, run_copy.h), with ranks as threads whose "hosts" are
// separate directories: every rank names run i by a path under its own host, as ranks without a
// shared filesystem do.

#include <doctest/doctest.h>

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "tests/temp_dir.h"
#include "tests/train/thread_comm.h"
#include "train/sweep/gather_runs.h"
#include "train/sweep/run_copy.h"

using namespace headlab;
using headlab::testing::TempDir;
namespace fs = std::filesystem;

namespace {

void write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

std::string read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// run.json of run `id` after `sessions` sessions of 10 steps (train/run/run_json.h's layout).
std::string run_json(const std::string& id, int sessions) {
  std::string list;
  for (int k = 0; k < sessions; ++k)
    list += fmt::format(
        "{}{{\"start\": \"2026-01-0{}\", \"start_step\": {}, \"end_step\": {}, "
        "\"outcome\": \"finished\"}}",
        k ? ", " : "", k + 1, 10 * k, 10 * k + 10);
  return fmt::format("{{\"run\": \"{}\", \"start\": \"2026-01-01 {}\", \"sessions\": [{}]}}\n", id,
                     id, list);
}

// A run directory as a trained run leaves it: headlab's marker, files, a checkpoint directory,
// `latest` a link; `sessions` sessions trained into it.
void make_run(const fs::path& dir, const std::string& id, int sessions = 1) {
  write(dir / ".headlab", "{\"headlab\": \"run\", \"id\": \"" + id + "\"}\n");
  write(dir / "run.json", run_json(id, sessions));
  write(dir / "summary.json", "{\"eval_accuracy\": 0.5}\n");
  const std::string step = fmt::format("step-{:06d}", 10 * sessions);
  write(dir / "checkpoints" / step / "model.safetensors", std::string("\0\1\2", 3) + id);
  fs::create_symlink(step, dir / "checkpoints" / "latest");
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
    CHECK(fs::read_symlink(on_0[i].dir / "checkpoints" / "latest") == "step-000010");
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
  CHECK(read(runs_on(host(0), 2)[1].dir / "run.json").find("someone else") != std::string::npos);
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

TEST_CASE("train: which of two copies of a run is newer comes from their run.json sessions") {
  const std::string one = run_json("7", 1), two = run_json("7", 2), three = run_json("7", 3);
  CHECK(compare_copies(one, one) == CopyOrder::same);
  CHECK(compare_copies("", "") == CopyOrder::same);
  CHECK(compare_copies("", one) == CopyOrder::newer);  // nothing trained there yet
  CHECK(compare_copies(one, "") == CopyOrder::older);
  CHECK(compare_copies(one, two) == CopyOrder::newer);
  CHECK(compare_copies(one, three) == CopyOrder::newer);
  CHECK(compare_copies(three, one) == CopyOrder::older);
  // Another run (another start), or a second session that differs: they went their own ways.
  CHECK(compare_copies(one, run_json("8", 2)) == CopyOrder::unrelated);
  std::string other_two = two;
  other_two.replace(other_two.rfind("\"finished\""), 10, "\"stopped!\"");
  CHECK(compare_copies(two, other_two) == CopyOrder::unrelated);
  CHECK(compare_copies(one, other_two) == CopyOrder::newer);  // both continue one
  // No sessions or start to go by (or not JSON at all): never taken for a continuation.
  CHECK(compare_copies("{\"run\": 1}", "{\"run\": 2}") == CopyOrder::unrelated);
  CHECK(compare_copies(one, "{not json") == CopyOrder::unrelated);
  CHECK(compare_copies("[]", one) == CopyOrder::unrelated);
}

TEST_CASE("train: a copy put in place of an older one replaces it whole, leaving nothing beside") {
  TempDir tmp("place-tree");
  make_run(tmp.path / "new" / "run", "5", 2);
  make_run(tmp.path / "host" / "run", "5", 1);
  write(tmp.path / "host" / "run" / "checkpoints" / "step-000010" / "optimizer.safetensors", "o");
  const std::string packed = pack_tree(tmp.path / "new" / "run");
  place_tree(packed, tmp.path / "host" / "run");
  CHECK(pack_tree(tmp.path / "host" / "run") == packed);
  CHECK_FALSE(fs::exists(tmp.path / "host" / "run" / "checkpoints" / "step-000010"));
  place_tree(packed, tmp.path / "host" / "missing");  // where there is none: renamed in
  CHECK(pack_tree(tmp.path / "host" / "missing") == packed);
  for (const auto& e : fs::directory_iterator(tmp.path / "host"))
    CHECK_MESSAGE(e.path().filename().string().rfind(".", 0) != 0, e.path());
  // A stale incoming directory is not this call's: refused, kept, and the run left as it was.
  write(tmp.path / "host" / ".run.incoming" / "mine.txt", "not headlab's");
  CHECK_THROWS_WITH_AS(place_tree(pack_tree(tmp.path / "new"), tmp.path / "host" / "run"),
                       doctest::Contains("it exists"), Error);
  CHECK(read(tmp.path / "host" / ".run.incoming" / "mine.txt") == "not headlab's");
  CHECK(pack_tree(tmp.path / "host" / "run") == packed);
}

TEST_CASE("train: a run resumed on another host replaces rank 0's older copy when gathered") {
  TempDir tmp("gather-runs-newer");
  auto host = [&](int r) { return tmp.path / ("host" + std::to_string(r)); };
  make_run(runs_on(host(0), 2)[1].dir, "1", 1);  // brought by the last gather
  std::vector<int> received(2, -1);
  testing::run_ranks(2, [&](Comm& comm) {
    const std::vector<SweepRun> runs = runs_on(host(comm.rank()), 2);
    make_run(runs[comm.rank()].dir, std::to_string(comm.rank()), 2);  // resumed since
    received[comm.rank()] = gather_run_dirs(comm, runs);
  });
  CHECK(received == std::vector<int>{1, 0});
  CHECK(pack_tree(runs_on(host(0), 2)[1].dir) == pack_tree(runs_on(host(1), 2)[1].dir));

  // The other way round (rank 0's copy has a session the trainer's lacks) is refused.
  TempDir tmp2("gather-runs-older");
  auto host2 = [&](int r) { return tmp2.path / ("host" + std::to_string(r)); };
  make_run(runs_on(host2(0), 2)[1].dir, "1", 3);
  const std::vector<std::string> errors = gather_two(host2);
  for (const std::string& e : errors)
    CHECK_MESSAGE(e.find("has sessions that the copy rank 1 trained lacks") != std::string::npos,
                  e);
  CHECK(read(runs_on(host2(0), 2)[1].dir / "run.json") == run_json("1", 3));
}

TEST_CASE("train: before a distributed resume each trainer gets the newest copy of its runs") {
  TempDir tmp("send-runs");
  const int ranks = 3, count = 6;  // run i on rank i mod 3
  auto host = [&](int r) { return tmp.path / ("host" + std::to_string(r)); };
  auto run = [&](int r, int i) { return runs_on(host(r), count)[i].dir; };
  for (int i = 0; i < count; ++i) make_run(run(0, i), std::to_string(i), i == 5 ? 2 : 1);
  fs::create_directories(host(1) / "sweep");
  fs::copy(run(0, 1), run(1, 1), fs::copy_options::recursive | fs::copy_options::copy_symlinks);
  make_run(run(1, 4), "4", 2);  // resumed on host 1 after the last gather: kept
  make_run(run(2, 5), "5", 1);  // older than rank 0's: replaced; run 2 is new to host 2
  std::vector<int> sent(ranks, -1);
  testing::run_ranks(ranks, [&](Comm& comm) {
    sent[comm.rank()] = send_run_dirs_to_trainers(comm, runs_on(host(comm.rank()), count));
  });
  CHECK(sent == std::vector<int>{2, 0, 0});
  CHECK(pack_tree(run(2, 2)) == pack_tree(run(0, 2)));
  CHECK(pack_tree(run(2, 5)) == pack_tree(run(0, 5)));
  CHECK(read(run(1, 4) / "run.json") == run_json("4", 2));
  CHECK(pack_tree(run(1, 1)) == pack_tree(run(0, 1)));
  CHECK_FALSE(fs::exists(run(1, 0)));  // rank 0's own runs and others' stay where they are
  CHECK_FALSE(fs::exists(run(2, 4)));

  // Copies that went their own ways: refused on every rank, neither touched.
  fs::remove_all(run(1, 4));
  make_run(run(1, 4), "someone else's", 2);
  std::vector<std::string> errors(ranks);
  testing::run_ranks(ranks, [&](Comm& comm) {
    try {
      send_run_dirs_to_trainers(comm, runs_on(host(comm.rank()), count));
    } catch (const Error& e) {
      errors[comm.rank()] = e.what();
    }
  });
  for (const std::string& e : errors) {
    CHECK_MESSAGE(e.find("went their own ways") != std::string::npos, e);
    CHECK_MESSAGE(e.find("run-4") != std::string::npos, e);
  }
  CHECK(read(run(1, 4) / "run.json") == run_json("someone else's", 2));
}
