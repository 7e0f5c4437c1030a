// ZeRO-1 sharding of the optimizer state (train/run/optimizer_shard.h) over ranks that are
// threads (tests/train/thread_comm.h): the partition, the bits of a sharded Adam against one
// Adam, each rank's state holding its shard alone, the gather to rank 0 and the scatter from it,
// and the refusal of an optimizer without a per-parameter update.

#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "optim/adam.h"
#include "optim/sgd.h"
#include "tests/train/thread_comm.h"
#include "train/run/optimizer_shard.h"

using namespace headlab;
using headlab::testing::run_ranks;

namespace {

// Five parameters of unequal sizes, the same values on every call.
NamedParameters make_params() {
  const std::vector<int64_t> sizes = {40, 7, 25, 25, 3};
  Rng rng(11);
  NamedParameters out;
  for (size_t i = 0; i < sizes.size(); ++i) {
    Tensor t = Tensor::zeros({sizes[i]});
    for (int64_t k = 0; k < sizes[i]; ++k) t[k] = rng.uniform(-1.0f, 1.0f);
    out.push_back({"p" + std::to_string(i), Var(t, true)});
  }
  return out;
}

// Step s's gradient of every parameter (the reduced gradient every rank holds).
void set_gradients(const NamedParameters& params, int64_t s) {
  Rng rng(100 + static_cast<uint64_t>(s));
  for (const auto& p : params) {
    Tensor g = Tensor::zeros(p.var.shape());
    for (int64_t k = 0; k < g.numel(); ++k) g[k] = rng.uniform(-1.0f, 1.0f);
    p.var.grad() = g;
  }
}

AdamOptions adam_options() {
  return {.lr = 0.01, .beta1 = 0.9, .beta2 = 0.98, .eps = 1e-8, .weight_decay = 0.1};
}

// Steps [from, to) of `optimizer` (sharded by `shard` when given).
void train(Optimizer& optimizer, OptimizerShard* shard, int64_t from, int64_t to) {
  for (int64_t s = from; s < to; ++s) {
    set_gradients(optimizer.parameters(), s);
    optimizer.set_lr(0.01 / static_cast<double>(s + 1));
    optimizer.step();
    if (shard) shard->broadcast_parameters();
  }
}

std::string bytes_of_dict(const StateDict& dict) {
  std::string out;
  for (const NamedTensor& t : dict) {
    out += t.name + ":";
    out.append(reinterpret_cast<const char*>(t.tensor.data()),
               static_cast<size_t>(t.tensor.numel()) * sizeof(float));
  }
  return out;
}

std::string values_of(const NamedParameters& params) {
  StateDict d;
  for (const auto& p : params) d.push_back({p.name, p.var.value()});
  return bytes_of_dict(d);
}

// An optimizer whose update is per parameter but that does not say so (a plugin's default).
class Undeclared : public Optimizer {
 public:
  explicit Undeclared(NamedParameters params) : Optimizer(std::move(params), 0.1, {}) {}
  const char* name() const override { return "undeclared"; }

 protected:
  void update_parameter(Tensor&, const Tensor&, std::span<Tensor>) override {}
};

}  // namespace

TEST_CASE("train: optimizer shard: whole tensors go to the least-loaded rank, largest first") {
  // 2 ranks: 40 -> 0, 25 (p2) -> 1, 25 (p3) -> 1 (25 < 40), 7 -> 0 (40 < 50), 3 -> 0 (47 < 50).
  CHECK(shard_owners({40, 7, 25, 25, 3}, 2) == std::vector<int>{0, 0, 1, 1, 0});
  // 3 ranks: 40 -> 0, 25 -> 1, 25 -> 2, 7 -> 1 (the lower of two 25s), 3 -> 2 (25 < 32).
  CHECK(shard_owners({40, 7, 25, 25, 3}, 3) == std::vector<int>{0, 1, 1, 2, 2});
  CHECK(shard_owners({5, 5, 5}, 1) == std::vector<int>{0, 0, 0});
  CHECK(shard_owners({5, 5}, 4) == std::vector<int>{0, 1});  // ranks beyond the tensors own none
}

TEST_CASE("train: optimizer shard: sharded Adam on 2 and 3 ranks equals one Adam bit for bit") {
  NamedParameters alone_params = make_params();
  AdamW alone(alone_params, adam_options());
  train(alone, nullptr, 0, 6);
  const std::string want_values = values_of(alone_params);
  const std::string want_state = bytes_of_dict(alone.state_dict());
  train(alone, nullptr, 6, 9);
  const std::string want_resumed = values_of(alone_params);
  const std::string want_resumed_state = bytes_of_dict(alone.state_dict());

  for (int ranks : {2, 3}) {
    CAPTURE(ranks);
    std::vector<std::string> values(ranks), resumed(ranks);
    std::vector<int64_t> held(ranks), expected_held(ranks);
    std::string gathered, gathered_after;
    int64_t whole = 0;
    run_ranks(ranks, [&](Comm& comm) {
      const size_t r = static_cast<size_t>(comm.rank());
      NamedParameters params = make_params();
      AdamW adam(params, adam_options());
      OptimizerShard shard(comm, adam, true);
      REQUIRE(shard.active());
      train(adam, &shard, 0, 6);
      values[r] = values_of(params);
      held[r] = adam.state_bytes();  // its own parameters' moments alone
      expected_held[r] = shard.state_bytes_per_rank()[r];
      const StateDict full = shard.gather_state();
      if (r == 0) {
        gathered = bytes_of_dict(full);
        for (const auto& p : params) whole += p.var.numel() * 2 * 4;
      } else {
        CHECK(full.empty());
      }

      // A resume: fresh parameters and optimizer; rank 0 loads the whole state, scatters it.
      NamedParameters params2 = make_params();
      for (size_t i = 0; i < params.size(); ++i)
        params2[i].var.value().copy_(params[i].var.value());
      AdamW adam2(params2, adam_options());
      OptimizerShard shard2(comm, adam2, true);
      if (r == 0) {
        adam2.set_owned(std::vector<bool>(params2.size(), true));
        adam2.load_state_dict(full);
      }
      shard2.scatter_state();
      CHECK(adam2.state_bytes() == expected_held[r]);
      CHECK(adam2.step_count() == 6);
      train(adam2, &shard2, 6, 9);
      resumed[r] = values_of(params2);
      const StateDict after = shard2.gather_state();
      if (r == 0) gathered_after = bytes_of_dict(after);
    });
    int64_t sum = 0;
    for (int r = 0; r < ranks; ++r) {
      CAPTURE(r);
      CHECK(values[r] == want_values);
      CHECK(resumed[r] == want_resumed);
      CHECK(held[r] == expected_held[r]);
      CHECK(held[r] > 0);
      CHECK(held[r] < whole);
      sum += held[r];
    }
    CHECK(sum == whole);  // the shards cover the state once
    CHECK(gathered == want_state);
    CHECK(gathered_after == want_resumed_state);
  }
}

TEST_CASE("train: optimizer shard: off, or alone, every rank keeps the whole state") {
  run_ranks(2, [](Comm& comm) {
    NamedParameters params = make_params();
    Adam adam(params, adam_options());
    OptimizerShard shard(comm, adam, false);
    CHECK_FALSE(shard.active());
    train(adam, &shard, 0, 2);
    const std::vector<int64_t> bytes = shard.state_bytes_per_rank();
    CHECK(bytes[0] == adam.state_bytes());
    CHECK(bytes[1] == adam.state_bytes());
  });
  NamedParameters params = make_params();
  Sgd sgd(params, {.lr = 0.1, .momentum = 0.9});
  LocalComm one;
  OptimizerShard shard(one, sgd, true);
  CHECK_FALSE(shard.active());
}

TEST_CASE(
    "train: optimizer shard: an optimizer without a declared per-parameter update is refused") {
  NamedParameters params = make_params();
  Undeclared undeclared(params);
  LocalComm one;
  OptimizerShard off(one, undeclared, false);  // unsharded: any optimizer
  try {
    OptimizerShard on(one, undeclared, true);
    FAIL("expected the refusal");
  } catch (const Error& e) {
    const std::string what = e.what();
    CHECK(what.find("runtime.shard_optimizer: optimizer \"undeclared\"") == 0);
    CHECK(what.find("set runtime.shard_optimizer = false") != std::string::npos);
    CHECK(what.find('\n') == std::string::npos);
  }
}
