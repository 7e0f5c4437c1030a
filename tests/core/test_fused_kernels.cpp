// Parity of the fused kernels (core/kernels_fused.cpp, fast_kernels.cpp, fast_attention.cpp) on
// the blas and onednn backends with the reference loops. Sizes cover the vector tails (17, 21),
// rows longer than the 64-key register path of the softmax (70), and the widths the encoder
// presets use (16, 32, 64).
//
// Tolerances: gemm_bias_act as gemm (1e-5 of |A||B| + |bias|); sums over rows (bias, gamma and
// beta gradients) 1e-5 of the sum of magnitudes; LayerNorm outputs 2e-5 * (1 + |ref|); softmax
// 1e-6 absolute (the vectorized exp is within 2 ulp); layout copies exact.

#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/kernels.h"
#include "core/rng.h"
#include "core/threads.h"

using namespace headlab;

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
const Backend kFast[] = {Backend::blas, Backend::onednn};

std::vector<float> random_vec(size_t n, Rng& rng, float lo = -1.0f, float hi = 1.0f) {
  std::vector<float> v(n);
  for (float& x : v) x = rng.uniform(lo, hi);
  return v;
}

// Largest violation of |got - want| <= rel * scale_i + abs (scale_i = 1 + |want_i| when no scale
// is given); <= 0 means every element is within.
double worst(const std::vector<float>& got, const std::vector<float>& want, double rel,
             double abs_tol, const std::vector<float>* scale = nullptr) {
  REQUIRE(got.size() == want.size());
  double w = -1.0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double s = scale ? (*scale)[i] : 1.0 + std::fabs(want[i]);
    const double excess = std::fabs(double(got[i]) - want[i]) - (rel * s + abs_tol);
    if (!(excess <= 0.0)) w = std::max(w, std::isnan(excess) ? 1e30 : excess);
  }
  return w;
}

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
            kernels_for(fast).gemm_bias_act(d, a.data(), b.data(), bias ? bv.data() : nullptr,
                                            relu, got.data());
            INFO(backend_name(fast), " m=", m, " n=", n, " k=", k, " bias=", bias,
                 " relu=", relu, " trans_b=", trans_b);
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
  kernels_for(Backend::onednn).bias_act_backward(dy.data(), y.data(), dy.data(), nullptr, rows,
                                                 cols);
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
          kernels_for(fast).add_layer_norm_forward(x.data(), r.data(), g, bt, y1.data(),
                                                   h1.data(), s1.data(), rows, cols, 1e-5f);
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
          kernels_for(fast).add_layer_norm_backward(h0.data(), s0.data(), g, dy.data(),
                                                    dx1.data(), false, nullptr, false, nullptr,
                                                    nullptr, rows, cols);
          std::vector<float> scale(n);
          for (size_t i = 0; i < n; ++i)
            scale[i] = (1.0f + std::fabs(dx0[i])) * std::max(1.0f, s0[i / cols]);
          CHECK(worst(dx1, dx0, 2e-5, 0.0, &scale) <= 0.0);
        }
}

TEST_CASE("core: heads_split and heads_merge are inverse permutations on every backend") {
  Rng rng(8);
  for (Backend b : {Backend::reference, Backend::blas, Backend::onednn})
    for (int64_t parts : {1, 3})
      for (int64_t dim : {1, 16, 21}) {
        const int64_t batch = 3, len = 5, heads = 2;
        const size_t n = static_cast<size_t>(batch * len * parts * heads * dim);
        const auto x = random_vec(n, rng);
        std::vector<float> y(n);
        const Kernels& k = kernels_for(b);
        k.heads_split(x.data(), y.data(), batch, len, parts, heads, dim);
        INFO(backend_name(b), " parts=", parts, " dim=", dim);
        // Spot-check the layout: (b, t, p, i, e) of x is (p, b, i, t, e) of y.
        bool layout_ok = true;
        for (int64_t bi = 0; bi < batch; ++bi)
          for (int64_t t = 0; t < len; ++t)
            for (int64_t p = 0; p < parts; ++p)
              for (int64_t i = 0; i < heads; ++i)
                for (int64_t e = 0; e < dim; ++e)
                  layout_ok = layout_ok &&
                              y[(((p * batch + bi) * heads + i) * len + t) * dim + e] ==
                                  x[((bi * len + t) * parts + p) * heads * dim + i * dim + e];
        CHECK(layout_ok);
        std::vector<float> back(n, std::numeric_limits<float>::quiet_NaN());
        k.heads_merge(y.data(), back.data(), false, batch, len, parts, heads, dim);
        CHECK(back == x);
        k.heads_merge(y.data(), back.data(), true, batch, len, parts, heads, dim);  // adds
        std::vector<float> twice(n);
        for (size_t i = 0; i < n; ++i) twice[i] = 2.0f * x[i];
        CHECK(back == twice);
      }
}

TEST_CASE("core: attention softmax with masks and dropout matches the reference") {
  Rng rng(9);
  const Kernels& ref = kernels_for(Backend::reference);
  for (Backend fast : kFast)
    for (int64_t keys : {1, 16, 17, 64, 70})
      for (int variant = 0; variant < 4; ++variant) {  // masks, dropout
        const bool masks = variant & 1, drop = variant & 2;
        const int64_t batch = 2, heads = 3, len = keys;
        const size_t n = static_cast<size_t>(batch * heads * len * keys);
        const auto s = random_vec(n, rng, -6.0f, 6.0f);
        std::vector<float> kpm(batch * keys, 0.0f), am(len * keys, 0.0f), mult(n);
        kpm[keys] = 1.0f;  // batch 1's first key is padding
        for (int64_t i = 0; i < len; ++i)
          for (int64_t j = i + 1; j < keys; ++j) am[i * keys + j] = 1.0f;  // causal
        for (float& m : mult) m = rng.uniform() < 0.3f ? 0.0f : 1.0f / 0.7f;
        std::vector<float> p0 = s, p1 = s, pd0(n), pd1(n);
        ref.attention_softmax_forward(p0.data(), drop ? pd0.data() : nullptr,
                                      drop ? mult.data() : nullptr, masks ? kpm.data() : nullptr,
                                      masks ? am.data() : nullptr, batch, heads, len, keys);
        kernels_for(fast).attention_softmax_forward(
            p1.data(), drop ? pd1.data() : nullptr, drop ? mult.data() : nullptr,
            masks ? kpm.data() : nullptr, masks ? am.data() : nullptr, batch, heads, len, keys);
        INFO(backend_name(fast), " keys=", keys, " masks=", masks, " dropout=", drop);
        CHECK(worst(p1, p0, 0.0, 1e-6) <= 0.0);
        if (drop) CHECK(worst(pd1, pd0, 0.0, 2e-6) <= 0.0);
        if (masks) {  // batch 1, query 0: every key masked gives an exact zero row
          bool zero_row = true;
          for (int64_t h = 0; h < heads; ++h)
            for (int64_t j = 0; j < keys; ++j)
              zero_row = zero_row && p1[((1 * heads + h) * len) * keys + j] == 0.0f;
          CHECK(zero_row);
        }
        const auto g = random_vec(n, rng);
        std::vector<float> d0 = g, d1 = g;
        ref.attention_softmax_backward(p0.data(), d0.data(), drop ? mult.data() : nullptr,
                                       batch * heads * len, keys);
        kernels_for(fast).attention_softmax_backward(p0.data(), d1.data(),
                                                     drop ? mult.data() : nullptr,
                                                     batch * heads * len, keys);
        CHECK(worst(d1, d0, 1e-5, 1e-6) <= 0.0);
      }
}

TEST_CASE("core: fused kernels split rows among threads and match the reference") {
  // Sizes large enough that each kernel takes two threads (fast_kernels.h: threads_for).
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
  fast.add_layer_norm_forward(x.data(), dy.data(), gamma.data(), beta.data(), y1.data(),
                              h1.data(), s1.data(), rows, cols, 1e-5f);
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

  const int64_t batch = 16, heads = 4, len = 32;  // 2048 rows of 32 keys
  const size_t ns = static_cast<size_t>(batch * heads * len * len);
  auto s = random_vec(ns, rng, -5.0f, 5.0f);
  std::vector<float> p0 = s, p1 = s;
  ref.attention_softmax_forward(p0.data(), nullptr, nullptr, nullptr, nullptr, batch, heads, len,
                                len);
  fast.attention_softmax_forward(p1.data(), nullptr, nullptr, nullptr, nullptr, batch, heads, len,
                                 len);
  CHECK(worst(p1, p0, 0.0, 1e-6) <= 0.0);
  set_num_threads(1);
}
