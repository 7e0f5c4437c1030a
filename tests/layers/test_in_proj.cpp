// MultiHeadAttention's one projection parameter, in_proj_weight [3 h d, d_model] (and
// in_proj_bias [3 h d]): drawn as the three Linear layers it replaces drew theirs, so a seed
// gives the same values; self-attention projects with one GEMM each way straight from it; and
// a state written with the three layers' names (w_q, w_k, w_v) is read by stacking them.

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "autograd/ops.h"
#include "core/error.h"
#include "core/kernels/kernels.h"
#include "layers/linear.h"
#include "layers/multi_head_attention.h"
#include "layers/qkv_state.h"
#include "tests/layers/reference.h"

using namespace headlab;
using namespace headlab::testing;

namespace {

// d_model 8, 2 heads of width 3: the projection is [18, 8], told apart by its 18 rows from w_o
// ([8, 6]) and from a part's [6, 8].
constexpr int64_t kModel = 8, kInner = 6, kFused = 3 * kInner;

MultiHeadAttentionOptions options(bool bias = true, Init init = Init::default_uniform) {
  MultiHeadAttentionOptions o{kModel, 2};
  o.head_dim = 3;
  o.bias = bias;
  o.init = init;
  return o;
}

// The GEMMs of one call.
struct Gemms final : GemmObserver {
  std::vector<GemmDesc> seen;
  void on_gemm(const GemmDesc& d) override { seen.push_back(d); }
  template <class Pred>
  int count(Pred p) const {
    int n = 0;
    for (const GemmDesc& d : seen) n += p(d) ? 1 : 0;
    return n;
  }
};

// The state of `m` as the three Linear children named it: w_q, w_k, w_v (weight, bias) first,
// then the rest, each name behind `prefix`.
StateDict legacy_state(const MultiHeadAttention& m, const std::string& prefix) {
  StateDict out;
  const char* parts[] = {"w_q", "w_k", "w_v"};
  for (int j = 0; j < 3; ++j) {
    out.push_back({prefix + parts[j] + ".weight",
                   m.in_proj_weight.value().slice(j * kInner, (j + 1) * kInner).clone()});
    if (m.in_proj_bias.defined())
      out.push_back({prefix + parts[j] + ".bias",
                     m.in_proj_bias.value().slice(j * kInner, (j + 1) * kInner).clone()});
  }
  for (const NamedTensor& t : m.state_dict())
    if (!t.name.starts_with("in_proj")) out.push_back({prefix + t.name, t.tensor.clone()});
  return out;
}

}  // namespace

TEST_CASE("layers: in_proj_weight holds the values three Linear layers drew, in their order") {
  for (const bool bias : {true, false})
    for (const Init init : {Init::default_uniform, Init::xavier_uniform}) {
      INFO("bias ", bias, ", init ", init_name(init));
      Rng r1(5), r2(5);
      MultiHeadAttention mha(options(bias, init), r1);
      const LinearOptions in{kModel, kInner, bias, init};
      Linear q(in, r2), k(in, r2), v(in, r2), o({kInner, kModel, bias, init}, r2);
      const Linear* parts[] = {&q, &k, &v};
      for (int j = 0; j < 3; ++j) {
        CHECK(max_abs_diff(mha.in_proj_weight.value().slice(j * kInner, (j + 1) * kInner),
                           parts[j]->weight.value()) == 0.0);
        if (bias)
          CHECK(max_abs_diff(mha.in_proj_bias.value().slice(j * kInner, (j + 1) * kInner),
                             parts[j]->bias.value()) == 0.0);
      }
      CHECK(mha.in_proj_bias.defined() == bias);
      CHECK(max_abs_diff(mha.w_o->weight.value(), o.weight.value()) == 0.0);
      r2.next_u64();  // the layer's dropout seed, drawn after its parameters
      CHECK(r1.next_u64() == r2.next_u64());  // no draw more or less
    }
}

TEST_CASE("layers: self-attention projects with one GEMM each way on in_proj_weight") {
  Rng rng(2), data(3);
  MultiHeadAttention mha(options(), rng);
  const Tensor x = randn({2, 4, kModel}, data), seed = randn({2, 4, kModel}, data);
  for (int pass = 0; pass < 2; ++pass) {  // the second accumulates
    Gemms g;
    set_gemm_observer(&g);
    Var xv(x.clone(), true);
    mha.forward(xv, xv, xv).output.backward(seed);
    set_gemm_observer(nullptr);
    CHECK(g.count([](const GemmDesc& d) { return d.trans_b && d.n == kFused; }) == 1);  // x W^T
    CHECK(g.count([](const GemmDesc& d) { return d.trans_a && d.m == kFused; }) == 1);  // g^T x
    // No projection by a part alone: x W_j^T [rows, 6] or dW_j [6, 8] (w_o's are [rows, 8] and
    // [8, 6]; its dx [rows, 6] is not transposed).
    CHECK(g.count([](const GemmDesc& d) {
      return (d.trans_b && d.n == kInner) || (d.trans_a && d.m == kInner);
    }) == 0);
  }
  CHECK(mha.in_proj_weight.grad().shape() == Shape{kFused, kModel});
}

TEST_CASE("layers: a frozen in_proj_weight gets no gradient, the input and w_o do") {
  Rng rng(6), data(7);
  MultiHeadAttention mha(options(), rng);
  mha.in_proj_weight.set_requires_grad(false);
  Var x(randn({2, 4, kModel}, data), true);
  mha.forward(x).backward(randn({2, 4, kModel}, data));
  CHECK_FALSE(mha.in_proj_weight.has_grad());
  CHECK(mha.in_proj_bias.has_grad());
  CHECK(mha.w_o->weight.has_grad());
  CHECK(x.has_grad());
}

TEST_CASE("layers: a state with w_q, w_k, w_v is read by stacking them into in_proj") {
  Rng r1(8), r2(9);
  MultiHeadAttention old(options(), r1), fresh(options(), r2);
  SUBCASE("model state, as load_state_dict reads it") {
    fresh.load_state_dict(legacy_state(old, ""));
    const StateDict a = old.state_dict(), b = fresh.state_dict();
    REQUIRE(a.size() == b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      INFO(a[i].name);
      CHECK(a[i].name == b[i].name);
      CHECK(max_abs_diff(a[i].tensor, b[i].tensor) == 0.0);
    }
  }
  SUBCASE("any prefix; the stacked entry takes w_q.weight's place") {
    const std::string p = "exp_avg.encoder.layers.0.attn.";
    const StateDict up = stack_legacy_qkv(legacy_state(old, p), [&](const std::string& n) {
      return n == p + "in_proj_weight" || n == p + "in_proj_bias";
    });
    REQUIRE(up.size() == 4);
    CHECK(up[0].name == p + "in_proj_weight");
    CHECK(up[1].name == p + "in_proj_bias");
    CHECK(up[2].name == p + "w_o.weight");
    CHECK(max_abs_diff(up[0].tensor, old.in_proj_weight.value()) == 0.0);
    CHECK(max_abs_diff(up[1].tensor, old.in_proj_bias.value()) == 0.0);
  }
  SUBCASE("left alone: names the loader does not expect, a partial or mis-shaped triple") {
    const StateDict state = legacy_state(old, "");
    CHECK(stack_legacy_qkv(state, [](const std::string&) { return false; }).size() == 8);
    StateDict partial = state;
    partial.erase(partial.begin() + 2);  // w_k.weight
    const StateDict kept = stack_legacy_qkv(partial, [](const std::string&) { return true; });
    CHECK(kept.size() == 5);  // the biases stacked, the weights not
    CHECK(kept[0].name == "w_q.weight");
    CHECK_THROWS_WITH_AS(fresh.load_state_dict(partial),
                         doctest::Contains("missing 'in_proj_weight'; unexpected 'w_q.weight'"),
                         Error);
    StateDict odd = state;
    odd[4].tensor = Tensor::zeros({kInner + 1, kModel});  // w_v.weight
    CHECK(stack_legacy_qkv(odd, [](const std::string&) { return true; }).size() == 6);
  }
}
