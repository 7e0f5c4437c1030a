// MultiHeadAttention's fast path (self-attention: one GEMM for Q, K and V on in_proj_weight,
// then the fused self_attention op, and head_gate_merged when the gate is not all ones) computes
// the same function as its generic path (each projection on its row block of in_proj_weight,
// split_heads, batched_matmul, masked_fill, softmax, dropout, merge_heads), values and
// gradients, on every backend.

#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <string>

#include "autograd/ops.h"
#include "layers/multi_head_attention.h"
#include "tests/autograd/backend_scope.h"
#include "tests/layers/reference.h"

using namespace headlab;
using namespace headlab::testing;
using headlab::test::BackendScope;
using headlab::test::kAllBackends;

TEST_CASE("layers: multi_head_attention fast path equals the generic path") {
  struct Setup {
    const char* name;
    bool masks;
    float attn_dropout;
    bool gated = false;  // head 0 ablated, head 1 scaled, dL/dgate asked (the head analysis)
  };
  for (Backend be : kAllBackends)
    for (const Setup& s :
         {Setup{"plain", false, 0.0f}, Setup{"masks", true, 0.0f},
          Setup{"attention dropout", false, 0.3f}, Setup{"gated heads", true, 0.0f, true}}) {
      BackendScope scope(be);
      INFO(std::string(backend_name(be)), " ", s.name);
      const int64_t b = 2, t = 5, d = 8;
      MultiHeadAttentionOptions o{d, 2};
      o.attn_dropout = s.attn_dropout;
      Rng r1(3), r2(3);
      MultiHeadAttention fast(o, r1), generic(o, r2);  // same parameters and dropout stream
      if (s.gated)
        for (MultiHeadAttention* m : {&fast, &generic}) {
          m->set_head_mask(std::array{0.0f, 1.5f});
          m->set_gate_requires_grad(true);
        }
      Rng data(4);
      const Tensor x = randn({b, t, d}, data);
      Tensor kpm = Tensor::zeros({b, t}), causal = Tensor::zeros({t, t});
      kpm[t] = 1.0f;  // with causal: batch 1's query 0 sees no key
      for (int64_t i = 0; i < t; ++i)
        for (int64_t j = i + 1; j < t; ++j) causal[i * t + j] = 1.0f;
      const Tensor* m1 = s.masks ? &kpm : nullptr;
      const Tensor* m2 = s.masks ? &causal : nullptr;

      const Tensor seed = randn({b, t, d}, data);
      Var xf(x.clone(), true);
      Var yf = fast.forward(xf, xf, xf, m1, m2, false).output;
      yf.backward(seed);
      // key and value are another Var with the same values: the generic path runs.
      Var xq(x.clone(), true), xkv(x.clone(), true);
      Var yg = generic.forward(xq, xkv, xkv, m1, m2, false).output;
      yg.backward(seed);
      CHECK(max_abs_diff(yf.value(), yg.value()) < 1e-5);
      Tensor gx = xq.grad().clone();
      for (int64_t i = 0; i < gx.numel(); ++i) gx[i] += xkv.grad()[i];
      CHECK(max_abs_diff(xf.grad(), gx) < 1e-4);
      const NamedParameters pf = fast.named_parameters(), pg = generic.named_parameters();
      REQUIRE(pf.size() == pg.size());
      for (size_t i = 0; i < pf.size(); ++i) {
        INFO(pf[i].name);
        REQUIRE(pf[i].var.has_grad());
        CHECK(max_abs_diff(pf[i].var.grad(), pg[i].var.grad()) < 1e-4);
      }
      if (s.gated) CHECK(max_abs_diff(fast.head_gate().grad(), generic.head_gate().grad()) < 1e-4);
    }
}
