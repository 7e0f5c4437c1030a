// The canonical gradient reduction (train/distributed/reduce.h): every split of a step's M micro-batches
// over ranks (ranks x grad_accum = M) gives bit-identical gradients, equal to the fold in
// micro-batch order written out here; one micro-batch is left untouched. Ranks are threads
// (tests/train/thread_comm.h), so this runs without MPI.

#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/rng.h"
#include "tests/train/thread_comm.h"
#include "train/distributed/reduce.h"

using namespace headlab;
using headlab::testing::run_ranks;

namespace {

// Two buffers, the second crossing chunk boundaries of the chain at every rank count.
const std::vector<int64_t> kSizes = {7, GradientReducer::kMinChunk * 5 + 45};

struct MicroBatch {
  std::vector<std::vector<float>> grads;  // per buffer
  int64_t tokens = 0;
};

// Gradients of widely different magnitudes and signs, with exact and signed zeros.
std::vector<MicroBatch> make_micro_batches(int64_t m, const std::vector<int64_t>& sizes = kSizes) {
  Rng rng(20240607);
  std::vector<MicroBatch> out(static_cast<size_t>(m));
  for (int64_t k = 0; k < m; ++k) {
    MicroBatch& mb = out[static_cast<size_t>(k)];
    mb.tokens = 13 + static_cast<int64_t>(rng.below(8));
    for (int64_t size : sizes) {
      std::vector<float> g(static_cast<size_t>(size));
      for (float& v : g) {
        const uint64_t kind = rng.below(10);
        v = kind == 0   ? 0.0f
            : kind == 1 ? -0.0f
                        : rng.normal() * std::ldexp(1.0f, static_cast<int>(rng.below(40)) - 20);
      }
      mb.grads.push_back(std::move(g));
    }
  }
  return out;
}

std::vector<std::span<float>> spans(std::vector<std::vector<float>>& buffers) {
  std::vector<std::span<float>> s;
  for (auto& b : buffers) s.emplace_back(b);
  return s;
}

// The order in which the overlap names the buffers of the last micro-batch.
enum class Overlap { none, reverse, first_only };

// Runs the reduction with `ranks` ranks of `accum` micro-batches each; rank 0's result. With
// overlap, the last micro-batch goes through begin_last / ready / end_last: buffers named in
// reverse, or only the first one named (the others left to end_last) while the sizes put
// several buckets in flight.
std::vector<std::vector<float>> reduce_split(const std::vector<MicroBatch>& mbs, int ranks,
                                             int64_t accum, Overlap overlap = Overlap::none,
                                             const std::vector<int64_t>& sizes = kSizes) {
  std::vector<std::vector<std::vector<float>>> results(static_cast<size_t>(ranks));
  int64_t total = 0;
  for (const MicroBatch& mb : mbs) total += mb.tokens;
  run_ranks(ranks, [&](Comm& comm) {
    GradientReducer reduce(comm, accum, sizes);
    std::vector<std::vector<float>> grads;
    for (int64_t a = 0; a < accum; ++a) {
      const MicroBatch& mb = mbs[static_cast<size_t>(comm.rank() * accum + a)];
      grads = mb.grads;  // "computed fresh" into the parameters' buffers
      if (a < accum - 1 || overlap == Overlap::none || !reduce.overlaps()) {
        reduce.add(spans(grads), mb.tokens);
        continue;
      }
      reduce.begin_last(mb.tokens);
      if (overlap == Overlap::reverse)
        for (size_t i = grads.size(); i-- > 0;) reduce.ready(i, grads[i]);
      else
        reduce.ready(0, grads[0]);
      reduce.end_last(spans(grads));
    }
    reduce.finish(spans(grads), total);
    results[static_cast<size_t>(comm.rank())] = grads;
  });
  for (int r = 1; r < ranks; ++r) REQUIRE(results[static_cast<size_t>(r)] == results[0]);
  return results[0];
}

bool bitwise_equal(const std::vector<std::vector<float>>& a,
                   const std::vector<std::vector<float>>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].size() != b[i].size() ||
        std::memcmp(a[i].data(), b[i].data(), a[i].size() * sizeof(float)) != 0)
      return false;
  return true;
}

}  // namespace

TEST_CASE("train: gradient reduction is bit-identical for every split of the micro-batches") {
  for (int64_t m : {4, 6}) {
    CAPTURE(m);
    const std::vector<MicroBatch> mbs = make_micro_batches(m);
    // The definition, written out: S_0 = n_0 g_0, S_k = S_{k-1} + n_k g_k, G = S / sum n.
    std::vector<std::vector<float>> expected = mbs[0].grads;
    int64_t total = 0;
    for (const MicroBatch& mb : mbs) total += mb.tokens;
    for (size_t b = 0; b < kSizes.size(); ++b)
      for (size_t i = 0; i < expected[b].size(); ++i) {
        float s = static_cast<float>(mbs[0].tokens) * mbs[0].grads[b][i];
        for (size_t k = 1; k < mbs.size(); ++k) {
          const float t = static_cast<float>(mbs[k].tokens) * mbs[k].grads[b][i];
          s = s + t;
        }
        expected[b][i] = s / static_cast<float>(total);
      }
    CHECK(bitwise_equal(reduce_split(mbs, 1, m), expected));  // one process, grad_accum = M
    for (int ranks = 2; ranks <= m; ++ranks) {
      if (m % ranks != 0) continue;
      CAPTURE(ranks);
      CHECK(bitwise_equal(reduce_split(mbs, ranks, m / ranks), expected));
    }
  }
}

TEST_CASE("train: gradient reduction overlapped with the backward gives the same bits") {
  // Three large buffers, each a bucket with the small one before it; the largest is more than
  // the chain's chunk at 2 and 3 ranks (the gradient over the ranks), so it is cut.
  const int64_t b = GradientReducer::kMinChunk * 40 + 1000;
  const std::vector<int64_t> sizes = {5, b, 3, 4 * b, 11, b};
  const std::vector<MicroBatch> mbs = make_micro_batches(6, sizes);
  const std::vector<std::vector<float>> plain = reduce_split(mbs, 1, 6, Overlap::none, sizes);
  for (int ranks : {2, 3}) {
    CAPTURE(ranks);
    const int64_t accum = 6 / ranks;
    CHECK(bitwise_equal(reduce_split(mbs, ranks, accum, Overlap::none, sizes), plain));
    CHECK(bitwise_equal(reduce_split(mbs, ranks, accum, Overlap::reverse, sizes), plain));
    CHECK(bitwise_equal(reduce_split(mbs, ranks, accum, Overlap::first_only, sizes), plain));
  }
  // One micro-batch per rank: the last is the only one, and rank 0's S_0 comes from ready().
  const std::vector<MicroBatch> three = make_micro_batches(3, sizes);
  CHECK(bitwise_equal(reduce_split(three, 3, 1, Overlap::reverse, sizes),
                      reduce_split(three, 1, 3, Overlap::none, sizes)));
}

// Rank 1's backward throws while its chain thread waits for rank 0's sum, which never comes
// (rank 0 sends nothing while rank 1 is busy): the reducer's destructor interrupts that wait
// (Comm::interrupt) instead of waiting for the peer, so the step's own error is what comes out,
// and rank 1's comm refuses every later call. What is checked is how the wait ended (by the
// interrupt, not by a message), never a time. Should the interrupt fail, rank 0 sends after a
// minute what rank 1 waits for, so that the test fails instead of hanging.
TEST_CASE("train: a reducer whose backward threw ends its chain's wait for a peer at once") {
  using headlab::testing::Mailboxes;
  const std::vector<int64_t> sizes = {GradientReducer::kMinChunk};  // one bucket, one chunk
  Mailboxes boxes;
  std::mutex mutex;
  std::condition_variable changed;
  bool done = false, refused_recv = false, refused_send = false;
  std::string error;
  run_ranks(2, boxes, [&](Comm& comm) {
    if (comm.rank() == 0) {
      std::unique_lock lock(mutex);
      if (!changed.wait_for(lock, std::chrono::seconds(60), [&] { return done; })) {
        const std::vector<float> sum(static_cast<size_t>(sizes[0]));
        for (int i = 0; i < 2; ++i)  // the hang guard above: for the chain, and the recv below
          comm.send(1, bytes_of(std::span<const float>(sum)));
      }
      return;
    }
    std::vector<float> grad(static_cast<size_t>(sizes[0]), 1.0f);
    try {
      GradientReducer reduce(comm, 1, sizes);
      reduce.begin_last(5);
      reduce.ready(0, grad);        // its bucket is in: the chain thread receives from rank 0
      boxes.wait_until_blocked(1);  // and waits, as rank 0 sends nothing
      throw std::runtime_error("the backward failed");
    } catch (const std::runtime_error& e) {
      error = e.what();
    }
    try {
      comm.recv(0, bytes_of(std::span<float>(grad)));
    } catch (const CommInterrupted&) {
      refused_recv = true;
    }
    try {
      comm.send(0, bytes_of(std::span<const float>(grad)));
    } catch (const CommInterrupted&) {
      refused_send = true;
    }
    {
      std::lock_guard lock(mutex);
      done = true;
    }
    changed.notify_all();
  });
  CHECK(error == "the backward failed");
  CHECK(boxes.ended_by_interrupt(1) == 1);  // the chain's receive, ended by the destructor
  CHECK(refused_recv);
  CHECK(refused_send);
}

// An interrupt that finds nothing waiting is harmless: a reducer that finished its step never
// interrupts (the comm goes on working after it), and an interrupt of an idle comm throws
// nothing, leaves the other ranks' messages alone and only makes that rank's later calls throw.
TEST_CASE("train: an interrupt with no wait in progress is harmless") {
  using headlab::testing::Mailboxes;
  const std::vector<int64_t> sizes = {GradientReducer::kMinChunk};
  Mailboxes boxes;
  std::vector<std::vector<float>> got(3);
  bool threw = false, refused = false;
  run_ranks(3, boxes, [&](Comm& comm) {
    const int r = comm.rank();
    std::vector<float> grad(static_cast<size_t>(sizes[0]), static_cast<float>(r + 1));
    {
      GradientReducer reduce(comm, 1, sizes);
      reduce.begin_last(1);
      reduce.end_last(std::vector<std::span<float>>{grad});
      reduce.finish(std::vector<std::span<float>>{grad}, 3);
    }  // destroyed after a whole step: no interrupt
    got[static_cast<size_t>(r)] = grad;
    std::vector<float> v = {static_cast<float>(r)};
    if (r == 2) {
      try {
        comm.interrupt();  // nothing waits on rank 2
      } catch (...) {
        threw = true;
      }
      try {
        comm.recv(0, bytes_of(std::span<float>(v)));
      } catch (const CommInterrupted&) {
        refused = true;
      }
      return;
    }
    // Ranks 0 and 1 still talk, after their reducers and beside rank 2's interrupt.
    if (r == 0) comm.send(1, bytes_of(std::span<const float>(v)));
    if (r == 1) {
      comm.recv(0, bytes_of(std::span<float>(v)));
      got[1].push_back(v[0]);
    }
  });
  CHECK_FALSE(threw);
  CHECK(refused);
  CHECK(boxes.ended_by_interrupt(2) == 0);
  // (1 + 2 + 3) / 3 tokens on every rank; rank 1 also received rank 0's 0.
  for (int r = 0; r < 3; ++r) CHECK(got[static_cast<size_t>(r)][0] == 2.0f);
  CHECK(got[1].back() == 0.0f);
}

TEST_CASE("train: gradient reduction of a single micro-batch leaves the gradient untouched") {
  std::vector<MicroBatch> mbs = make_micro_batches(1);
  std::vector<std::vector<float>> grads = mbs[0].grads;
  LocalComm comm;
  GradientReducer reduce(comm, 1, kSizes);
  CHECK_FALSE(reduce.active());
  reduce.add(spans(grads), 3);
  reduce.finish(spans(grads), 3);
  CHECK(bitwise_equal(grads, mbs[0].grads));
}

TEST_CASE("train: comm string helpers gather and broadcast strings of any length") {
  run_ranks(3, [](Comm& comm) {
    const std::string mine(static_cast<size_t>(comm.rank() * 5),
                           static_cast<char>('a' + comm.rank()));
    const std::vector<std::string> all = allgather_strings(comm, mine);
    REQUIRE(all.size() == 3);
    CHECK(all[0].empty());
    CHECK(all[1] == "bbbbb");
    CHECK(all[2] == std::string(10, 'c'));
    CHECK(broadcast_string(comm, 2, comm.rank() == 2 ? "from two" : "") == "from two");
  });
}

TEST_CASE("train: a hang's message names the ranks that did not arrive, with hosts when several") {
  const std::vector<std::string> one_host = {"box", "box", "box", "box"};
  CHECK(missing_ranks_message({true, false, true, true}, one_host, 300) ==
        "rank 1 did not arrive in 300 s (runtime.dist_timeout): ranks 0, 2 and 3 waited for it; "
        "it hung, was stopped or is far behind");
  CHECK(missing_ranks_message({false, true, false}, {}, 2) ==
        "ranks 0 and 2 did not arrive in 2 s (runtime.dist_timeout): rank 1 waited for them; "
        "they hung, were stopped or are far behind");
  CHECK(ranks_text({0, 1}, {"hostA", "hostB"}) == "ranks 0 on hostA and 1 on hostB");
  CHECK(missing_ranks_message({true, true}, one_host, 5).find("a deadlock") != std::string::npos);
}
