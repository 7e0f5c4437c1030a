// A checkpoint written before MultiHeadAttention held one in_proj_weight (three Linear children
// w_q, w_k, w_v in model.safetensors, and Adam's moments keyed by those names in
// optimizer.safetensors) is read through the stacking of layers/qkv_state.h and resumes exactly
// where a checkpoint with the new names does.

#include <doctest/doctest.h>

#include <string>

#include "core/rng.h"
#include "layers/multi_head_attention.h"
#include "optim/adam.h"
#include "tests/layers/reference.h"
#include "tests/temp_dir.h"
#include "train/io/safetensors.h"
#include "train/run/checkpoint.h"

using namespace headlab;
using namespace headlab::testing;

namespace {

// `state` as the three children named it: every "<P>in_proj_weight" [3 n, D] becomes
// "<P>w_q.weight", "<P>w_k.weight", "<P>w_v.weight" (its row blocks), biases likewise.
StateDict split_in_proj(const StateDict& state) {
  StateDict out;
  for (const NamedTensor& t : state) {
    std::string leaf;
    if (t.name.ends_with("in_proj_weight")) leaf = "weight";
    if (t.name.ends_with("in_proj_bias")) leaf = "bias";
    if (leaf.empty()) {
      out.push_back(t);
      continue;
    }
    const std::string prefix = t.name.substr(0, t.name.size() - ("in_proj_" + leaf).size());
    const int64_t n = t.tensor.size(0) / 3;
    const char* parts[] = {"w_q.", "w_k.", "w_v."};
    for (int64_t j = 0; j < 3; ++j)
      out.push_back({prefix + parts[j] + leaf, t.tensor.slice(j * n, (j + 1) * n).clone()});
  }
  return out;
}

bool holds(const StateDict& state, const std::string& name) {
  for (const NamedTensor& t : state)
    if (t.name == name) return true;
  return false;
}

struct Model {
  Rng rng;
  MultiHeadAttention mha;
  Adam adam;
  explicit Model(uint64_t seed)
      : rng(seed), mha({8, 2}, rng), adam(mha.named_parameters(), {.lr = 0.01}) {}
  void step(const Tensor& x, const Tensor& seed) {
    mha.forward(Var(x)).backward(seed);
    adam.step();
    adam.zero_grad();
  }
};

}  // namespace

TEST_CASE("train: a checkpoint with w_q, w_k, w_v (model and Adam moments) resumes exactly") {
  TempDir dir("headlab-legacy-ckpt");
  Rng data(3);
  const Tensor x = randn({2, 5, 8}, data), seed = randn({2, 5, 8}, data);
  Model a(1);
  for (int i = 0; i < 3; ++i) a.step(x, seed);

  CheckpointData c;
  c.step = 3;
  c.model = split_in_proj(a.mha.state_dict());
  c.optimizer = split_in_proj(a.adam.state_dict());
  c.resolved_config = "[train]\nsteps = 4\n";
  save_checkpoint(dir.path, c, 1);
  const CheckpointData loaded = load_checkpoint(dir.path);
  // On disk the old names, as an older headlab wrote them.
  CHECK(
      holds(read_safetensors(loaded.dir / "optimizer.safetensors").tensors, "exp_avg_sq.w_v.bias"));
  CHECK(holds(loaded.model, "w_k.weight"));
  CHECK_FALSE(holds(loaded.model, "in_proj_weight"));

  Model b(2);  // other values everywhere until loaded
  b.mha.load_state_dict(loaded.model);
  b.adam.load_state_dict(loaded.optimizer);
  CHECK(b.adam.step_count() == 3);
  a.step(x, seed);
  b.step(x, seed);
  const StateDict ma = a.mha.state_dict(), mb = b.mha.state_dict();
  const StateDict oa = a.adam.state_dict(), ob = b.adam.state_dict();
  REQUIRE(ma.size() == mb.size());
  REQUIRE(oa.size() == ob.size());
  for (size_t i = 0; i < ma.size(); ++i) {
    INFO(ma[i].name);
    CHECK(ma[i].tensor.to_vector() == mb[i].tensor.to_vector());
  }
  for (size_t i = 0; i < oa.size(); ++i) {
    INFO(oa[i].name);
    CHECK(oa[i].tensor.to_vector() == ob[i].tensor.to_vector());
  }
}
