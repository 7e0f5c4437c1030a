// Memory is estimated before it is used (train/config/config.h: check_memory): under an
// address-space limit (ulimit -v, RLIMIT_AS) a train --dry-run, an eval and an analysis whose
// estimate exceeds it are refused with one line naming the estimate and the limit, before they
// allocate (no std::bad_alloc, no OOM killer), and what fits still runs.

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

// AddressSanitizer reserves terabytes of shadow address space at start-up, so an ASan build
// cannot start at all under a 4 GiB RLIMIT_AS ("ReserveShadowMemoryRange failed ... Perhaps
// you're using ulimit -v"): the case is for the plain builds.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif
#else
constexpr bool kAddressSanitizer = false;
#endif

}  // namespace

TEST_CASE("train: memory estimates are checked against ulimit -v before allocating") {
  if (kAddressSanitizer) {
    MESSAGE("skipped: an AddressSanitizer build cannot start under ulimit -v (its shadow memory)");
    return;
  }
  TempDir tmp("memory");
  const fs::path run = tmp / "run";
  const RunResult trained = run_cli({"train", "configs/tiny.toml", "--out", run.string(),
                                     "--no-progress", "--no-analysis", "--set", "train.steps=30"});
  REQUIRE_MESSAGE(trained.exit_code == 0, trained.describe());
  RunOptions limited;
  limited.address_space_limit = rlim_t{4} << 30;  // 4 GiB
  limited.timeout_seconds = kCaseTimeout;
  const std::string limit = "exceeds the address-space limit of this process (ulimit -v), 4.00 GiB";
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"train", "configs/tiny.toml", "--out", (tmp / "new").string(), "--dry-run", "--no-analysis",
        "--set", "train.eval_batch_size=65536"},
       "train.eval_batch_size: estimated memory 7.77 GiB"},
      {{"train", "configs/tiny.toml", "--out", (tmp / "new").string(), "--set",
        "train.eval_batch_size=32768"},
       "train.eval_batch_size: estimated memory of the head analysis"},
      {{"eval", run.string(), "--set", "train.eval_batch_size=65536"},
       "train.eval_batch_size: estimated memory of the evaluation 7.77 GiB"},
      {{"analyze", run.string(), "--batch-size", "32768"},
       "analyze: --batch-size 32768: train.eval_batch_size: estimated memory of the head analysis"},
  };
  for (const auto& [args, fragment] : cases) {
    const Snapshot before = snapshot(tmp.path());
    const RunResult r = run_cli(args, limited);
    show(args[0], r);
    const std::string problem = check_rejected(r, fragment);
    CHECK_MESSAGE(problem.empty(), args[0] << ": " << problem << "\n" << r.describe());
    CHECK_MESSAGE(r.err.find(limit) != std::string::npos, r.describe());
    const std::string changed = snapshot_diff(before, snapshot(tmp.path()));
    CHECK_MESSAGE(changed.empty(), args[0] << ": changed the file system:\n" << changed);
  }
  // What fits the limit runs under it.
  const RunResult ok = run_cli({"eval", run.string()}, limited);
  CHECK_MESSAGE(ok.exit_code == 0, ok.describe());
  CHECK(ok.out.find("accuracy: ") != std::string::npos);
}
