// Parity of the fused kernels (core/kernels/: fused.cpp, fast.cpp, attention_fast.cpp) on
// the blas and onednn backends with the reference loops. Sizes cover the vector tails (17, 21),
// score rows longer than the 64-key register path (70), and the widths the encoder presets use.
//
// Tolerances: gemm_bias_act as gemm (1e-5 of |A||B| + |bias|); sums over rows (bias, gamma and
// beta gradients) 1e-5 of the sum of magnitudes; LayerNorm outputs 2e-5 * (1 + |ref|); softmax
// 1e-6 absolute (the vectorized exp is within 2 ulp); attention outputs and gradients 2e-5
// relative plus a few ulp per term of their sums.

#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/kernels/kernels.h"
#include "core/rng.h"
#include "core/threads.h"
#include "tests/core/kernel_test_util.h"

using namespace headlab;
using namespace headlab::kernel_test;

namespace {

// Column sums of |x| [rows, cols]: the scale of a sum over rows.
std::vector<float> abs_column_sums(const std::vector<float>& x, int64_t rows, int64_t cols) {
  std::vector<float> s(static_cast<size_t>(cols), 0.0f);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < cols; ++j) s[j] += std::fabs(x[r * cols + j]);
  return s;
}

}  // namespace

TEST_CASE("core: gemm_bias_act matches gemm plus bias and ReLU on every backend") {
  Rng rng(5);
  const Kernels& ref = kernels_for(Backend::reference);
  for (Backend fast : kFast)
    for (int64_t m : {1, 17, 64})
      for (int64_t n : {3, 21, 64})
        for (int64_t k : {0, 5, 64})
          for (int variant = 0; variant < 8; ++variant) {
            const bool bias = variant & 1, relu = variant & 2, trans_b = variant & 4;
            GemmDesc d{.trans_b = trans_b, .m = m, .n = n, .k = k};
            const auto a = random_vec(static_cast<size_t>(m * k), rng);
            const auto b = random_vec(static_cast<size_t>(k * n), rng);
            const auto bv = random_vec(static_cast<size_t>(n), rng);
            std::vector<float> want(static_cast<size_t>(m * n), 0.0f);
            ref.gemm(d, a.data(), b.data(), want.data());
            for (int64_t i = 0; i < m; ++i)
              for (int64_t j = 0; j < n; ++j) {
                float& v = want[i * n + j];
                if (bias) v += bv[j];
                if (relu) v = v > 0.0f ? v : 0.0f;
              }
            std::vector<float> got(want.size(), std::numeric_limits<float>::quiet_NaN());
            kernels_for(fast).gemm_bias_act(d, a.data(), b.data(), bias ? bv.data() : nullptr, relu,
                                            got.data());
            INFO(backend_name(fast), " m=", m, " n=", n, " k=", k, " bias=", bias, " relu=", relu,
                 " trans_b=", trans_b);
            CHECK(worst(got, want, 1e-5, 1e-6 * static_cast<double>(k + 1)) <= 0.0);
          }
}

TEST_CASE("core: bias_act_backward masks by y > 0 and sums the bias gradient") {
  Rng rng(6);
  const Kernels& ref = kernels_for(Backend::reference);
  for (Backend fast : kFast)
    for (int64_t rows : {1, 33, 200})
      for (int64_t cols : {5, 17, 64})
        for (int variant = 0; variant < 3; ++variant) {  // relu + db, relu only, db only
          const bool relu = variant < 2, with_db = variant != 1;
          const auto dy = random_vec(static_cast<size_t>(rows * cols), rng);
          auto y = random_vec(static_cast<size_t>(rows * cols), rng);
          for (size_t i = 0; i < y.size(); i += 7) y[i] = 0.0f;  // exactly 0 counts as masked
          std::vector<float> dz_want(dy.size()), dz_got(dy.size()), db_want(cols), db_got(cols);
          ref.bias_act_backward(dy.data(), relu ? y.data() : nullptr, dz_want.data(),
                                with_db ? db_want.data() : nullptr, rows, cols);
          kernels_for(fast).bias_act_backward(dy.data(), relu ? y.data() : nullptr, dz_got.data(),
                                              with_db ? db_got.data() : nullptr, rows, cols);
          INFO(backend_name(fast), " rows=", rows, " cols=", cols, " variant=", variant);
          if (relu) CHECK(dz_got == dz_want);  // a select: exact
          if (with_db) {
            const auto scale = abs_column_sums(relu ? dz_want : dy, rows, cols);
            CHECK(worst(db_got, db_want, 1e-5, 1e-7, &scale) <= 0.0);
          }
        }
  // In place (dz aliasing dy) gives the same mask.
  const int64_t rows = 9, cols = 21;
  auto dy = random_vec(rows * cols, rng), y = random_vec(rows * cols, rng);
  std::vector<float> want(dy.size());
  ref.bias_act_backward(dy.data(), y.data(), want.data(), nullptr, rows, cols);
  kernels_for(Backend::onednn)
      .bias_act_backward(dy.data(), y.data(), dy.data(), nullptr, rows, cols);
  CHECK(dy == want);
}

TEST_CASE("core: add_layer_norm forward and backward match the reference, with every option") {
  Rng rng(7);
  const Kernels& ref = kernels_for(Backend::reference);
  for (Backend fast : kFast)
    for (int64_t rows : {1, 40})
      for (int64_t cols : {1, 17, 64, 256})
        for (int affine = 0; affine < 3; ++affine) {  // gamma and beta, gamma only, none
          const size_t n = static_cast<size_t>(rows * cols);
          const auto x = random_vec(n, rng, -2.0f, 3.0f), r = random_vec(n, rng);
          const auto gamma = random_vec(cols, rng, 0.5f, 1.5f), beta = random_vec(cols, rng);
          const float* g = affine < 2 ? gamma.data() : nullptr;
          const float* bt = affine == 0 ? beta.data() : nullptr;
          std::vector<float> y0(n), h0(n), s0(rows), y1(n), h1(n), s1(rows);
          ref.add_layer_norm_forward(x.data(), r.data(), g, bt, y0.data(), h0.data(), s0.data(),
                                     rows, cols, 1e-5f);
          kernels_for(fast).add_layer_norm_forward(x.data(), r.data(), g, bt, y1.data(), h1.data(),
                                                   s1.data(), rows, cols, 1e-5f);
          INFO(backend_name(fast), " rows=", rows, " cols=", cols, " affine=", affine);
          CHECK(worst(y1, y0, 2e-5, 0.0) <= 0.0);
          CHECK(worst(h1, h0, 2e-5, 0.0) <= 0.0);
          // rstd of a constant row is 1/sqrt(eps) ~ 316: compare relatively.
          CHECK(worst(s1, s0, 2e-5, 0.0, &s0) <= 0.0);

          // Backward from the reference's saved values, into fresh and accumulating targets.
          const auto dy = random_vec(n, rng);
          const auto prior_x = random_vec(n, rng), prior_r = random_vec(n, rng);
          for (int acc = 0; acc < 4; ++acc) {
            const bool acc_x = acc & 1, acc_r = acc & 2;
            std::vector<float> dx0 = prior_x, dr0 = prior_r, dx1 = prior_x, dr1 = prior_r;
            std::vector<float> dg0(cols), db0(cols), dg1(cols), db1(cols);
            ref.add_layer_norm_backward(h0.data(), s0.data(), g, dy.data(), dx0.data(), acc_x,
                                        dr0.data(), acc_r, dg0.data(), db0.data(), rows, cols);
            kernels_for(fast).add_layer_norm_backward(h0.data(), s0.data(), g, dy.data(),
                                                      dx1.data(), acc_x, dr1.data(), acc_r,
                                                      dg1.data(), db1.data(), rows, cols);
            INFO("accumulate dx ", acc_x, " dr ", acc_r);
            // ds is rstd times O(1) terms: scale the tolerance by rstd's size.
            std::vector<float> ds_scale(n);
            for (size_t i = 0; i < n; ++i)
              ds_scale[i] = (1.0f + std::fabs(dx0[i])) * std::max(1.0f, s0[i / cols]);
            CHECK(worst(dx1, dx0, 2e-5, 0.0, &ds_scale) <= 0.0);
            CHECK(worst(dr1, dr0, 2e-5, 0.0, &ds_scale) <= 0.0);
            std::vector<float> gh(n);
            for (size_t i = 0; i < n; ++i) gh[i] = dy[i] * h0[i];
            const auto sg = abs_column_sums(gh, rows, cols), sb = abs_column_sums(dy, rows, cols);
            CHECK(worst(dg1, dg0, 1e-5, 1e-7, &sg) <= 0.0);
            CHECK(worst(db1, db0, 1e-5, 1e-7, &sb) <= 0.0);
          }
          // dr null and no parameter gradients: dx alone.
          std::vector<float> dx0(n), dx1(n);
          ref.add_layer_norm_backward(h0.data(), s0.data(), g, dy.data(), dx0.data(), false,
                                      nullptr, false, nullptr, nullptr, rows, cols);
          kernels_for(fast).add_layer_norm_backward(h0.data(), s0.data(), g, dy.data(), dx1.data(),
                                                    false, nullptr, false, nullptr, nullptr, rows,
                                                    cols);
          std::vector<float> scale(n);
          for (size_t i = 0; i < n; ++i)
            scale[i] = (1.0f + std::fabs(dx0[i])) * std::max(1.0f, s0[i / cols]);
          CHECK(worst(dx1, dx0, 2e-5, 0.0, &scale) <= 0.0);
        }
}

namespace {

// Runs attention forward and backward on `fast` and the reference for one shape and checks
// P (and P'), the output, and dqkv written and accumulated. Masks: batch 1's first key is
// padding and attention is causal, which leaves batch 1's query 0 with no key.
void check_attention(Backend fast, int64_t batch, int64_t heads, int64_t len, int64_t dim,
                     bool masks, bool drop, Rng& rng) {
  const Kernels& ref = kernels_for(Backend::reference);
  const size_t nq = static_cast<size_t>(batch * len * 3 * heads * dim);
  const size_t np = static_cast<size_t>(batch * heads * len * len);
  const size_t no = static_cast<size_t>(batch * len * heads * dim);
  const auto qkv = random_vec(nq, rng, -1.5f, 1.5f);
  std::vector<float> kpm(batch * len, 0.0f), am(len * len, 0.0f), mult(np);
  if (batch > 1) kpm[len] = 1.0f;
  for (int64_t i = 0; i < len; ++i)
    for (int64_t j = i + 1; j < len; ++j) am[i * len + j] = 1.0f;
  for (float& m : mult) m = rng.uniform() < 0.3f ? 0.0f : 1.0f / 0.7f;
  AttentionDesc d;
  d.batch = batch, d.heads = heads, d.len = len, d.dim = dim, d.scale = 0.6f;
  d.key_padding_mask = masks ? kpm.data() : nullptr;
  d.attn_mask = masks ? am.data() : nullptr;
  d.dropout_mask = drop ? mult.data() : nullptr;
  std::vector<float> p0(np), p1(np, std::nanf("")), pd0(np), pd1(np), o0(no), o1(no);
  ref.attention_forward(d, qkv.data(), p0.data(), pd0.data(), o0.data());
  kernels_for(fast).attention_forward(d, qkv.data(), p1.data(), pd1.data(), o1.data());
  INFO(backend_name(fast), " B=", batch, " h=", heads, " T=", len, " d=", dim, " masks=", masks,
       " dropout=", drop);
  CHECK(worst(p1, p0, 0.0, 1e-6) <= 0.0);
  if (drop) CHECK(worst(pd1, pd0, 0.0, 2e-6) <= 0.0);
  CHECK(worst(o1, o0, 2e-5, 2e-6 * static_cast<double>(len)) <= 0.0);
  if (masks && batch > 1) {  // the query with no key: an exact zero row and output
    bool zero = true;
    for (int64_t i = 0; i < heads; ++i)
      for (int64_t s = 0; s < len; ++s) zero = zero && p1[((1 * heads + i) * len) * len + s] == 0;
    CHECK(zero);
  }
  const auto dout = random_vec(no, rng);
  const auto prior = random_vec(nq, rng);
  for (bool accumulate : {false, true}) {
    std::vector<float> g0 = prior, g1 = accumulate ? prior : std::vector<float>(nq, std::nanf(""));
    if (!accumulate) g0.assign(nq, 0.0f);
    ref.attention_backward(d, qkv.data(), p0.data(), pd0.data(), dout.data(), g0.data(),
                           accumulate);
    kernels_for(fast).attention_backward(d, qkv.data(), p0.data(), pd0.data(), dout.data(),
                                         g1.data(), accumulate);
    INFO("accumulate ", accumulate);
    CHECK(worst(g1, g0, 2e-5, 4e-6 * static_cast<double>(len + dim)) <= 0.0);
  }
}

}  // namespace

TEST_CASE("core: fused attention forward and backward match the reference") {
  Rng rng(8);
  for (Backend fast : kFast) {
    // The encoder presets' shapes, and odd ones: vector tails, rows past the 64-key register
    // path, head widths past one vector, a single token.
    for (auto [len, dim] : {std::pair<int64_t, int64_t>{16, 16},
                            {32, 16},
                            {64, 32},
                            {17, 21},
                            {70, 8},
                            {1, 3},
                            {5, 1}})
      for (int variant = 0; variant < 3; ++variant)
        check_attention(fast, 2, 3, len, dim, variant == 1, variant == 2, rng);
    check_attention(fast, 3, 2, 9, 64, true, true, rng);
  }
}

TEST_CASE("core: fused kernels split rows among threads and match the reference") {
  // Sizes large enough that each kernel takes two threads (core/kernels/fast.h: threads_for).
  Rng rng(10);
  const Kernels& ref = kernels_for(Backend::reference);
  const Kernels& fast = kernels_for(Backend::onednn);
  set_num_threads(2);
  const int64_t rows = 1027, cols = 128;  // rows not divisible by the thread count
  const size_t n = static_cast<size_t>(rows * cols);
  const auto dy = random_vec(n, rng), y = random_vec(n, rng), x = random_vec(n, rng, -2, 3);
  const auto gamma = random_vec(cols, rng, 0.5f, 1.5f), beta = random_vec(cols, rng);
  std::vector<float> dz0(n), dz1(n), db0(cols), db1(cols);
  ref.bias_act_backward(dy.data(), y.data(), dz0.data(), db0.data(), rows, cols);
  fast.bias_act_backward(dy.data(), y.data(), dz1.data(), db1.data(), rows, cols);
  CHECK(dz1 == dz0);
  const auto sdz = abs_column_sums(dz0, rows, cols);
  CHECK(worst(db1, db0, 1e-5, 1e-7, &sdz) <= 0.0);

  std::vector<float> y0(n), h0(n), s0(rows), y1(n), h1(n), s1(rows);
  ref.add_layer_norm_forward(x.data(), dy.data(), gamma.data(), beta.data(), y0.data(), h0.data(),
                             s0.data(), rows, cols, 1e-5f);
  fast.add_layer_norm_forward(x.data(), dy.data(), gamma.data(), beta.data(), y1.data(), h1.data(),
                              s1.data(), rows, cols, 1e-5f);
  CHECK(worst(y1, y0, 2e-5, 0.0) <= 0.0);
  std::vector<float> dx0(n), dr0(n), dx1(n), dr1(n), dg0(cols), dg1(cols), dbt0(cols), dbt1(cols);
  ref.add_layer_norm_backward(h0.data(), s0.data(), gamma.data(), y.data(), dx0.data(), false,
                              dr0.data(), false, dg0.data(), dbt0.data(), rows, cols);
  fast.add_layer_norm_backward(h0.data(), s0.data(), gamma.data(), y.data(), dx1.data(), false,
                               dr1.data(), false, dg1.data(), dbt1.data(), rows, cols);
  CHECK(worst(dx1, dx0, 2e-5, 2e-6) <= 0.0);
  CHECK(dr1 == dx1);
  std::vector<float> gh(n);
  for (size_t i = 0; i < n; ++i) gh[i] = y[i] * h0[i];
  const auto sg = abs_column_sums(gh, rows, cols), sb = abs_column_sums(y, rows, cols);
  CHECK(worst(dg1, dg0, 1e-5, 1e-7, &sg) <= 0.0);
  CHECK(worst(dbt1, dbt0, 1e-5, 1e-7, &sb) <= 0.0);

  // Attention with its heads shared among the threads.
  check_attention(Backend::onednn, 16, 4, 32, 16, true, true, rng);
  set_num_threads(1);
}
