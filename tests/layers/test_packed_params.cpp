// The packed-parameter invariant of MultiHeadAttention (autograd/packed_params.h): w_q, w_k and
// w_v keep their values in one buffer and their gradients as views of one buffer, so the
// self-attention projection runs as one GEMM forward and one for the weight gradient; and each
// thing that could break it (reassigning a value or a gradient, clearing a gradient,
// load_state_dict) keeps the fused path and the numbers.

#include <doctest/doctest.h>

#include <vector>

#include "autograd/packed_params.h"
#include "core/kernels/kernels.h"
#include "layers/multi_head_attention.h"
#include "tests/layers/reference.h"

using namespace headlab;
using namespace headlab::testing;

namespace {

// d_model 8, 2 heads of width 3: the projections are [6, 8] each, [18, 8] fused, so the fused
// products are told apart by their 18 rows (w_o's are [8, 6]).
constexpr int64_t kModel = 8, kInner = 6, kFused = 3 * kInner;

MultiHeadAttentionOptions options() {
  MultiHeadAttentionOptions o{kModel, 2};
  o.head_dim = 3;
  return o;
}

std::vector<Var> qkv_weights(const MultiHeadAttention& m) {
  return {m.w_q->weight, m.w_k->weight, m.w_v->weight};
}
std::vector<Var> qkv_biases(const MultiHeadAttention& m) {
  return {m.w_q->bias, m.w_k->bias, m.w_v->bias};
}

// The GEMMs of one forward and backward of self-attention on x.
struct Step final : GemmObserver {
  std::vector<GemmDesc> seen;
  void on_gemm(const GemmDesc& d) override { seen.push_back(d); }
  // The fused projection forward ([rows, 18] = x W_cat^T) and its weight gradient
  // (dW_cat [18, 8] = g^T x); per-part weight gradients read g's columns with lda 18.
  int fused_forward() const {
    return count([](const GemmDesc& d) { return d.n == kFused; });
  }
  int fused_weight_grad() const {
    return count([](const GemmDesc& d) { return d.trans_a && d.m == kFused && d.n == kModel; });
  }
  int per_part_weight_grads() const {
    return count([](const GemmDesc& d) { return d.trans_a && d.lda == kFused; });
  }
  template <class Pred>
  int count(Pred p) const {
    int n = 0;
    for (const GemmDesc& d : seen) n += p(d) ? 1 : 0;
    return n;
  }
};

Step run(MultiHeadAttention& m, const Tensor& x, const Tensor& seed) {
  Step s;
  set_gemm_observer(&s);
  Var xv(x.clone(), true);
  m.forward(xv, xv, xv).output.backward(seed);
  set_gemm_observer(nullptr);
  return s;
}

void check_packed(const MultiHeadAttention& m) {
  CHECK(packed::values_packed(qkv_weights(m)));
  CHECK(packed::values_packed(qkv_biases(m)));
  CHECK(packed::grads_packed(qkv_weights(m)));
}

}  // namespace

TEST_CASE("layers: multi_head_attention keeps w_q, w_k, w_v (and biases) in one buffer") {
  Rng rng(1);
  MultiHeadAttention mha(options(), rng);
  CHECK(packed::values_packed(qkv_weights(mha)));
  CHECK(packed::values_packed(qkv_biases(mha)));
  // Same draws as before packing: a layer built from the same seed has the same values.
  Rng rng2(1);
  MultiHeadAttention again(options(), rng2);
  CHECK(max_abs_diff(mha.w_v->weight.value(), again.w_v->weight.value()) == 0.0);
  // Loading a state dict copies into the packed buffer and keeps it.
  mha.load_state_dict(again.state_dict());
  CHECK(packed::values_packed(qkv_weights(mha)));
  CHECK(packed::values_packed(qkv_biases(mha)));
}

TEST_CASE("layers: multi_head_attention runs the fused projection with packed gradients") {
  Rng rng(2), data(3);
  MultiHeadAttention mha(options(), rng);
  const Tensor x = randn({2, 4, kModel}, data), seed = randn({2, 4, kModel}, data);
  const Step first = run(mha, x, seed);
  CHECK(first.fused_forward() == 1);
  CHECK(first.fused_weight_grad() == 1);
  CHECK(first.per_part_weight_grads() == 0);
  check_packed(mha);
  const Step second = run(mha, x, seed);  // accumulating into the packed gradients
  CHECK(second.fused_weight_grad() == 1);
  CHECK(second.per_part_weight_grads() == 0);
}

TEST_CASE("layers: reassigning a packed value or gradient keeps the fused path and the numbers") {
  Rng r1(4), r2(4), data(5);
  MultiHeadAttention mha(options(), r1), twin(options(), r2);  // same parameters
  const Tensor x = randn({2, 4, kModel}, data), seed = randn({2, 4, kModel}, data);
  const Tensor w_k = randn({kInner, kModel}, data), b_q = randn({kInner}, data);

  // A value reassigned to a tensor of its own (the twin gets the same values in place).
  mha.w_k->weight.value() = w_k.clone();
  mha.w_q->bias.value() = b_q.clone();
  twin.w_k->weight.value().copy_(w_k);
  twin.w_q->bias.value().copy_(b_q);
  CHECK_FALSE(packed::values_packed(qkv_weights(mha)));
  const Step s = run(mha, x, seed);
  CHECK(s.fused_weight_grad() == 1);  // re-packed before the forward
  CHECK(s.per_part_weight_grads() == 0);
  check_packed(mha);
  CHECK(max_abs_diff(mha.w_k->weight.value(), w_k) == 0.0);
  run(twin, x, seed);

  // A gradient reassigned, another cleared: re-packed on the next backward, the reassigned one's
  // contribution kept, the cleared one's starting again.
  mha.w_q->weight.grad() = mha.w_q->weight.grad().clone();
  mha.w_v->weight.clear_grad();
  twin.w_v->weight.grad().zero_();
  const Step t = run(mha, x, seed);
  CHECK(t.fused_weight_grad() == 1);
  CHECK(t.per_part_weight_grads() == 0);
  check_packed(mha);
  run(twin, x, seed);

  const NamedParameters pm = mha.named_parameters(), pt = twin.named_parameters();
  REQUIRE(pm.size() == pt.size());
  for (size_t i = 0; i < pm.size(); ++i) {
    INFO(pm[i].name);
    CHECK(max_abs_diff(pm[i].var.value(), pt[i].var.value()) == 0.0);
    CHECK(max_abs_diff(pm[i].var.grad(), pt[i].var.grad()) < 1e-5);
  }
}

TEST_CASE("layers: a frozen projection gets no gradient, the others one GEMM each") {
  Rng rng(6), data(7);
  MultiHeadAttention mha(options(), rng);
  mha.w_q->weight.set_requires_grad(false);
  const Tensor x = randn({2, 4, kModel}, data), seed = randn({2, 4, kModel}, data);
  const Step s = run(mha, x, seed);
  CHECK(s.fused_forward() == 1);  // the values stay packed
  CHECK(s.fused_weight_grad() == 0);
  CHECK(s.per_part_weight_grads() == 2);
  CHECK_FALSE(mha.w_q->weight.has_grad());
  CHECK(mha.w_k->weight.has_grad());
}
