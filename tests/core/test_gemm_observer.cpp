// The GEMM observer (core/kernels/kernels.h): every backend reports each gemm and gemm_bias_act
// once, and the fused attention as the batched GEMMs it stands for (attention_gemms); nothing is
// reported once the observer is removed.

#include <doctest/doctest.h>

#include <vector>

#include "core/kernels/kernels.h"
#include "core/rng.h"
#include "tests/core/kernel_test_util.h"

using namespace headlab;
using namespace headlab::kernel_test;

namespace {

struct Recorder final : GemmObserver {
  std::vector<GemmDesc> seen;
  void on_gemm(const GemmDesc& d) override { seen.push_back(d); }
};

bool same(const GemmDesc& a, const GemmDesc& b) {
  const GemmDesc x = a.resolved(), y = b.resolved();
  return x.trans_a == y.trans_a && x.trans_b == y.trans_b && x.m == y.m && x.n == y.n &&
         x.k == y.k && x.alpha == y.alpha && x.beta == y.beta && x.lda == y.lda && x.ldb == y.ldb &&
         x.ldc == y.ldc && x.batch == y.batch && x.stride_a == y.stride_a &&
         x.stride_b == y.stride_b && x.stride_c == y.stride_c;
}

}  // namespace

TEST_CASE("core: every backend reports its GEMMs, and the fused attention's, to the observer") {
  Rng rng(1);
  const int64_t b = 2, t = 5, h = 2, d = 3;
  const auto a = random_vec(64, rng), w = random_vec(64, rng), bias = random_vec(8, rng);
  const auto qkv = random_vec(static_cast<size_t>(b * t * 3 * h * d), rng);
  const auto dout = random_vec(static_cast<size_t>(b * t * h * d), rng);
  std::vector<float> c(64), p(static_cast<size_t>(b * h * t * t)), out(dout.size()),
      dqkv(qkv.size());
  const GemmDesc g{.trans_b = true, .m = 4, .n = 8, .k = 6, .alpha = 0.5f};
  const GemmDesc gba{.trans_b = true, .m = 4, .n = 8, .k = 6};
  AttentionDesc ad;
  ad.batch = b;
  ad.heads = h;
  ad.len = t;
  ad.dim = d;
  ad.scale = 0.6f;
  const std::vector<GemmDesc> fwd = attention_gemms(ad, false), bwd = attention_gemms(ad, true);
  REQUIRE(fwd.size() == 2);
  REQUIRE(bwd.size() == 4);
  CHECK(fwd[0].alpha == 0.6f);  // S = scale Q K^T
  CHECK(fwd[0].batch == b * h);

  for (Backend be : {Backend::reference, Backend::blas, Backend::onednn}) {
    INFO(backend_name(be));
    const Kernels& k = kernels_for(be);
    Recorder rec;
    set_gemm_observer(&rec);
    k.gemm(g, a.data(), w.data(), c.data());
    k.gemm_bias_act(gba, a.data(), w.data(), bias.data(), true, c.data());
    k.attention_forward(ad, qkv.data(), p.data(), nullptr, out.data());
    k.attention_backward(ad, qkv.data(), p.data(), nullptr, dout.data(), dqkv.data(), false);
    k.softmax_forward(a.data(), c.data(), 8, 8);  // not a product: not reported
    set_gemm_observer(nullptr);
    k.gemm(g, a.data(), w.data(), c.data());  // removed: not reported

    std::vector<GemmDesc> want{g, gba};
    want.insert(want.end(), fwd.begin(), fwd.end());
    want.insert(want.end(), bwd.begin(), bwd.end());
    REQUIRE(rec.seen.size() == want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      INFO("call ", i);
      CHECK(same(rec.seen[i], want[i]));
    }
  }
}
