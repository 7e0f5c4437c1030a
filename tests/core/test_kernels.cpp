// Parity of the fast kernel backends (blas, onednn) with the reference loops.
//
// Tolerances, stated once:
//   gemm          |fast - ref| <= 1e-5 * (|alpha| sum_p |a_ip b_pj| + |beta c_ij|) + 1e-7
//                 (fp32 accumulation error is below k * 2^-24 of that sum; k <= 65 here)
//   softmax       1e-6 absolute (outputs lie in [0, 1]); row sums within 1e-5 of 1
//   log-softmax   1e-5 * (1 + |ref|)
//   layer norm    2e-5 * (1 + |ref|) for y, mean, rstd, dx; 1e-4 * (1 + |ref|) for the sums
//                 over rows dgamma and dbeta
//   relu          exact; gelu 1e-5 * (1 + |ref|) (oneDNN evaluates erf by a polynomial)

#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/kernels/backends.h"
#include "core/kernels/kernels.h"
#include "core/rng.h"
#include "core/threads.h"
#include "tests/core/kernel_test_util.h"

using namespace headlab;
using namespace headlab::kernel_test;

namespace {

std::vector<float> abs_of(const std::vector<float>& v) {
  std::vector<float> a(v.size());
  for (size_t i = 0; i < v.size(); ++i) a[i] = std::fabs(v[i]);
  return a;
}

struct GemmCase {
  GemmDesc d;
  size_t size_a, size_b, size_c;
};

GemmCase make_case(GemmDesc d) {
  const GemmDesc r = d.resolved();
  const auto rows_a = r.trans_a ? r.k : r.m, rows_b = r.trans_b ? r.n : r.k;
  GemmCase c{d, 0, 0, 0};
  c.size_a = static_cast<size_t>((r.batch - 1) * r.stride_a + rows_a * r.lda);
  c.size_b = static_cast<size_t>((r.batch - 1) * r.stride_b + rows_b * r.ldb);
  c.size_c = static_cast<size_t>((r.batch - 1) * r.stride_c + r.m * r.ldc);
  return c;
}

// Runs the case on `fast` and on the reference and checks the tolerance above; also checks
// that C's padding (between ldc and n, between batch items) is left alone.
void check_gemm(Backend fast, const GemmDesc& d, Rng& rng) {
  const GemmCase gc = make_case(d);
  const auto a = random_vec(gc.size_a, rng), b = random_vec(gc.size_b, rng);
  auto c0 = random_vec(gc.size_c, rng);
  std::vector<float> want = c0, got = c0;
  if (d.beta == 0.0f)  // C must not be read: poison it for the fast backend
    for (float& x : got) x = std::numeric_limits<float>::quiet_NaN();
  kernels_for(Backend::reference).gemm(d, a.data(), b.data(), want.data());
  kernels_for(fast).gemm(d, a.data(), b.data(), got.data());
  // Bound: |alpha| |A| |B| + |beta| |C0|, from the reference on absolute values.
  GemmDesc bd = d;
  bd.alpha = std::fabs(d.alpha);
  bd.beta = std::fabs(d.beta);
  std::vector<float> bound = abs_of(c0);
  kernels_for(Backend::reference).gemm(bd, abs_of(a).data(), abs_of(b).data(), bound.data());
  // Positions outside the written region keep their old value (NaN for beta 0) in both.
  const GemmDesc r = d.resolved();
  std::vector<char> written(gc.size_c, 0);
  for (int64_t bi = 0; bi < r.batch; ++bi)
    for (int64_t i = 0; i < r.m; ++i)
      for (int64_t j = 0; j < r.n; ++j) written[bi * r.stride_c + i * r.ldc + j] = 1;
  std::vector<float> got_w, want_w, bound_w;
  size_t untouched_bad = 0;
  for (size_t i = 0; i < gc.size_c; ++i) {
    if (written[i]) {
      got_w.push_back(got[i]);
      want_w.push_back(want[i]);
      bound_w.push_back(bound[i]);
    } else if (d.beta != 0.0f && got[i] != c0[i]) {
      ++untouched_bad;
    } else if (d.beta == 0.0f && !std::isnan(got[i])) {
      ++untouched_bad;
    }
  }
  INFO(std::string(backend_name(fast)), " m=", r.m, " n=", r.n, " k=", r.k, " ta=", r.trans_a,
       " tb=", r.trans_b, " batch=", r.batch, " lda=", r.lda, " ldb=", r.ldb, " ldc=", r.ldc,
       " alpha=", r.alpha, " beta=", r.beta);
  CHECK(worst(got_w, want_w, 1e-5, 1e-7, &bound_w) <= 0.0);
  CHECK(untouched_bad == 0);
}

std::vector<float> with_masks(size_t rows, size_t cols, Rng& rng, float scale) {
  auto x = random_vec(rows * cols, rng, -scale, scale);
  for (size_t j = 0; j < cols; ++j) x[j] = kNegInf;  // row 0 fully masked
  if (rows > 1)
    for (size_t j = 0; j < cols; j += 2) x[cols + j] = kNegInf;  // row 1 half masked
  if (rows > 2) x[2 * cols + cols - 1] = kNegInf;                // row 2 one masked
  return x;
}

}  // namespace

TEST_CASE("core: gemm parity blas and onednn vs reference, odd sizes and transposes") {
  Rng rng(11);
  const int64_t sizes[] = {1, 3, 17, 64, 65};
  for (Backend fast : kFast)
    for (int64_t m : sizes)
      for (int64_t n : sizes)
        for (int64_t k : sizes)
          for (int t = 0; t < 4; ++t) {
            GemmDesc d;
            d.m = m, d.n = n, d.k = k;
            d.trans_a = t & 1;
            d.trans_b = t & 2;
            check_gemm(fast, d, rng);
          }
}

TEST_CASE("core: gemm parity batched, strided leading dims, alpha and beta") {
  Rng rng(12);
  const float alphas[] = {1.0f, 0.25f, -2.0f};
  const float betas[] = {0.0f, 1.0f, 0.5f};
  for (Backend fast : kFast)
    for (int t = 0; t < 4; ++t)
      for (float alpha : alphas)
        for (float beta : betas)
          for (int64_t batch : {1, 3, 17}) {
            GemmDesc d;
            d.m = 17, d.n = 3, d.k = 65;
            d.trans_a = t & 1;
            d.trans_b = t & 2;
            d.alpha = alpha;
            d.beta = beta;
            d.batch = batch;
            check_gemm(fast, d, rng);  // packed
            d.lda = (d.trans_a ? d.m : d.k) + 5;
            d.ldb = (d.trans_b ? d.k : d.n) + 2;
            d.ldc = d.n + 7;
            d.stride_a = (d.trans_a ? d.k : d.m) * d.lda + 3;
            d.stride_b = (d.trans_b ? d.n : d.k) * d.ldb + 1;
            d.stride_c = d.m * d.ldc + 4;
            check_gemm(fast, d, rng);  // strided
          }
}

TEST_CASE("core: gemm attention-shaped batches and k == 0") {
  Rng rng(13);
  for (Backend fast : kFast) {
    // Scores Q K^T / sqrt(d) over [B*h] items of [T, d], then probabilities times V.
    GemmDesc scores;
    scores.m = 16, scores.n = 16, scores.k = 16, scores.batch = 64, scores.trans_b = true;
    scores.alpha = 0.25f;
    check_gemm(fast, scores, rng);
    GemmDesc values;
    values.m = 16, values.n = 16, values.k = 16, values.batch = 64;
    check_gemm(fast, values, rng);
    // k == 0: C = beta C (and C = 0 for beta 0).
    for (float beta : {0.0f, 1.0f, 0.5f}) {
      GemmDesc d;
      d.m = 3, d.n = 5, d.k = 0, d.beta = beta, d.batch = 2;
      std::vector<float> c(30, 2.0f), want(30, 2.0f * beta);
      kernels_for(fast).gemm(d, nullptr, nullptr, c.data());
      CHECK(c == want);
    }
  }
}

TEST_CASE("core: softmax parity, rows sum to 1, masked rows, large logits") {
  Rng rng(21);
  for (Backend fast : kFast)
    for (int64_t cols : {1, 3, 17, 64, 65})
      for (float scale : {3.0f, 1e4f}) {
        const int64_t rows = 7;
        const auto x = with_masks(rows, cols, rng, scale);
        std::vector<float> want(x.size()), got(x.size());
        kernels_for(Backend::reference).softmax_forward(x.data(), want.data(), rows, cols);
        kernels_for(fast).softmax_forward(x.data(), got.data(), rows, cols);
        INFO(std::string(backend_name(fast)), " cols=", cols, " scale=", scale);
        CHECK(worst(got, want, 0.0, 1e-6) <= 0.0);
        for (int64_t r = 0; r < rows; ++r) {
          double sum = 0.0;
          bool all_masked = true;
          for (int64_t j = 0; j < cols; ++j) {
            const float v = got[r * cols + j];
            CHECK(std::isfinite(v));
            if (x[r * cols + j] == kNegInf) CHECK(v == 0.0f);
            all_masked = all_masked && x[r * cols + j] == kNegInf;
            sum += v;
          }
          CHECK(std::fabs(sum - (all_masked ? 0.0 : 1.0)) <= 1e-5);
        }
        // Backward: dx = y (dy - <dy, y>).
        const auto dy = random_vec(x.size(), rng);
        std::vector<float> dx_want(x.size()), dx_got(x.size());
        kernels_for(Backend::reference)
            .softmax_backward(want.data(), dy.data(), dx_want.data(), rows, cols);
        kernels_for(fast).softmax_backward(want.data(), dy.data(), dx_got.data(), rows, cols);
        CHECK(worst(dx_got, dx_want, 1e-5, 1e-6) <= 0.0);
      }
}

TEST_CASE("core: log-softmax parity, masked rows, large logits") {
  Rng rng(22);
  for (Backend fast : kFast)
    for (int64_t cols : {1, 3, 17, 64, 65})
      for (float scale : {3.0f, 1e4f}) {
        const int64_t rows = 5;
        const auto x = with_masks(rows, cols, rng, scale);
        std::vector<float> want(x.size()), got(x.size());
        kernels_for(Backend::reference).log_softmax_forward(x.data(), want.data(), rows, cols);
        kernels_for(fast).log_softmax_forward(x.data(), got.data(), rows, cols);
        INFO(std::string(backend_name(fast)), " cols=", cols, " scale=", scale);
        for (size_t i = 0; i < x.size(); ++i) {
          if (x[i] == kNegInf) {
            CHECK(got[i] == kNegInf);  // masked entries, and the fully masked row
          } else {
            CHECK(std::isfinite(got[i]));
            CHECK(std::fabs(got[i] - want[i]) <= 1e-5 * (1.0 + std::fabs(want[i])));
          }
        }
        // Backward: dx = dy - exp(y) sum(dy); a fully masked row gives dx = dy.
        const auto dy = random_vec(x.size(), rng);
        std::vector<float> dx_want(x.size()), dx_got(x.size());
        kernels_for(Backend::reference)
            .log_softmax_backward(want.data(), dy.data(), dx_want.data(), rows, cols);
        kernels_for(fast).log_softmax_backward(want.data(), dy.data(), dx_got.data(), rows, cols);
        CHECK(worst(dx_got, dx_want, 1e-5, 1e-6) <= 0.0);
      }
}

TEST_CASE("core: layer norm parity with and without affine, forward and backward") {
  Rng rng(31);
  for (Backend fast : kFast)
    for (int64_t cols : {1, 3, 17, 64, 65})
      for (int affine = 0; affine < 4; ++affine) {  // bit 0: gamma, bit 1: beta
        const int64_t rows = 9;
        const auto x = random_vec(rows * cols, rng, -3.0f, 5.0f);
        const auto gamma_v = random_vec(cols, rng, 0.5f, 1.5f);
        const auto beta_v = random_vec(cols, rng);
        const float* gamma = affine & 1 ? gamma_v.data() : nullptr;
        const float* beta = affine & 2 ? beta_v.data() : nullptr;
        std::vector<float> y_want(x.size()), y_got(x.size()), mean_want(rows), mean_got(rows),
            rstd_want(rows), rstd_got(rows);
        kernels_for(Backend::reference)
            .layer_norm_forward(x.data(), gamma, beta, y_want.data(), mean_want.data(),
                                rstd_want.data(), rows, cols, 1e-5f);
        kernels_for(fast).layer_norm_forward(x.data(), gamma, beta, y_got.data(), mean_got.data(),
                                             rstd_got.data(), rows, cols, 1e-5f);
        INFO(std::string(backend_name(fast)), " cols=", cols, " affine=", affine);
        CHECK(worst(y_got, y_want, 2e-5, 0.0) <= 0.0);
        CHECK(worst(mean_got, mean_want, 2e-5, 0.0) <= 0.0);
        CHECK(worst(rstd_got, rstd_want, 2e-5, 0.0) <= 0.0);

        // Backward with every combination of wanted parameter gradients.
        const auto dy = random_vec(x.size(), rng);
        for (int wanted = 0; wanted < 4; ++wanted) {  // bit 0: dgamma, bit 1: dbeta
          std::vector<float> dx_want(x.size()), dx_got(x.size()), dg_want(cols), dg_got(cols),
              db_want(cols), db_got(cols);
          const bool dg = wanted & 1, db = wanted & 2;
          kernels_for(Backend::reference)
              .layer_norm_backward(x.data(), gamma, mean_want.data(), rstd_want.data(), dy.data(),
                                   dx_want.data(), dg ? dg_want.data() : nullptr,
                                   db ? db_want.data() : nullptr, rows, cols);
          kernels_for(fast).layer_norm_backward(
              x.data(), gamma, mean_want.data(), rstd_want.data(), dy.data(), dx_got.data(),
              dg ? dg_got.data() : nullptr, db ? db_got.data() : nullptr, rows, cols);
          INFO("dgamma=", dg, " dbeta=", db);
          CHECK(worst(dx_got, dx_want, 2e-5, 1e-6) <= 0.0);
          CHECK(worst(dg_got, dg_want, 1e-4, 0.0) <= 0.0);
          CHECK(worst(db_got, db_want, 1e-4, 0.0) <= 0.0);
        }
      }
}

TEST_CASE("core: relu and gelu parity, forward and backward") {
  Rng rng(41);
  for (Backend fast : kFast)
    for (int64_t n : {1, 3, 17, 64, 65, 4099}) {
      auto x = random_vec(static_cast<size_t>(n), rng, -6.0f, 6.0f);
      x[0] = 0.0f;  // relu's kink: gradient 0 there in both
      const auto dy = random_vec(x.size(), rng);
      std::vector<float> want(x.size()), got(x.size());
      const Kernels& ref = kernels_for(Backend::reference);
      const Kernels& k = kernels_for(fast);
      INFO(std::string(backend_name(fast)), " n=", n);
      ref.relu_forward(x.data(), want.data(), n);
      k.relu_forward(x.data(), got.data(), n);
      CHECK(got == want);
      ref.relu_backward(x.data(), dy.data(), want.data(), n);
      k.relu_backward(x.data(), dy.data(), got.data(), n);
      CHECK(got == want);
      ref.gelu_forward(x.data(), want.data(), n);
      k.gelu_forward(x.data(), got.data(), n);
      CHECK(worst(got, want, 1e-5, 0.0) <= 0.0);
      ref.gelu_backward(x.data(), dy.data(), want.data(), n);
      k.gelu_backward(x.data(), dy.data(), got.data(), n);
      CHECK(worst(got, want, 1e-5, 0.0) <= 0.0);
    }
}

TEST_CASE("core: onednn primitives are cached per shape and per thread count the work pays for") {
  // GELU runs a oneDNN eltwise primitive on every CPU (products, softmax forwards and layer
  // normalization take headlab's own kernels where the CPU has AVX-512).
  Rng rng(51);
  const Kernels& k = kernels_for(Backend::onednn);
  const int saved = num_threads();
  auto gelu_primitives = [&](int64_t n, int threads) {
    const auto x = random_vec(n, rng);
    std::vector<float> y(n), want(n);
    kernels_for(Backend::reference).gelu_forward(x.data(), want.data(), n);
    set_num_threads(threads);
    k.gelu_forward(x.data(), y.data(), n);
    CHECK(worst(y, want, 1e-5, 1e-6) <= 0.0);
    return onednn_cached_primitives();
  };
  // A few hundred elements: one thread whatever the count (a parallel region would cost more
  // than the work, and on a busy machine a scheduler time slice), so one primitive.
  const int64_t small = 33 * 29;
  const size_t first = gelu_primitives(small, 1);
  CHECK(gelu_primitives(small, 1) == first);          // same shape: no new primitive
  CHECK(gelu_primitives(small, 2) == first);          // more threads offered, none taken
  CHECK(gelu_primitives(small - 1, 2) == first + 1);  // a new shape
  // Enough work for two threads: a primitive per thread count.
  const int64_t large = int64_t{1} << 17;
  const size_t one = gelu_primitives(large, 1);
  CHECK(gelu_primitives(large, 2) == one + 1);
  CHECK(gelu_primitives(large, 2) == one + 1);
  set_num_threads(saved);
}

TEST_CASE("core: onednn kernels are safe to call from several threads at once") {
  // Four threads, two shapes, each thread with its own inputs and output: pairs share a cache
  // entry (and must take turns on its memories), the pairs use different entries concurrently,
  // and the first calls race to create the entries.
  const int64_t m = 40, n = 24, k = 36;
  GemmDesc shapes[2];
  shapes[0].m = m, shapes[0].n = n, shapes[0].k = k;  // [40, 36] x [36, 24]
  shapes[1].m = m, shapes[1].n = k, shapes[1].k = n;  // [40, 24] x [36, 24]^T
  shapes[1].trans_b = true;
  std::vector<int> bad(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&bad, &shapes, t] {
      Rng rng(70 + t);
      const GemmDesc& d = shapes[t % 2];
      const auto a = random_vec(m * k, rng), b = random_vec(k * n, rng);
      std::vector<float> want(d.m * d.n), c(d.m * d.n);
      kernels_for(Backend::reference).gemm(d, a.data(), b.data(), want.data());
      // GELU: a oneDNN primitive per shape, shared by each pair of threads.
      const int64_t cols = k - t % 2;
      std::vector<float> sm_want(a.size()), sm(a.size());
      kernels_for(Backend::reference).gelu_forward(a.data(), sm_want.data(), m * cols);
      for (int it = 0; it < 1000; ++it) {
        std::fill(c.begin(), c.end(), 0.0f);
        kernels_for(Backend::onednn).gemm(d, a.data(), b.data(), c.data());
        for (size_t i = 0; i < c.size(); ++i)
          if (std::fabs(c[i] - want[i]) > 1e-4f) ++bad[t];
        kernels_for(Backend::onednn).gelu_forward(a.data(), sm.data(), m * cols);
        for (int64_t i = 0; i < m * cols; ++i)
          if (std::fabs(sm[i] - sm_want[i]) > 1e-4f) ++bad[t];
      }
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) CHECK_MESSAGE(bad[t] == 0, "thread ", t, ": wrong results");
}

TEST_CASE("core: fast kernels accept zero sizes") {
  for (Backend fast : kFast) {
    const Kernels& k = kernels_for(fast);
    GemmDesc d;
    d.m = 0, d.n = 4, d.k = 3;
    CHECK_NOTHROW(k.gemm(d, nullptr, nullptr, nullptr));
    CHECK_NOTHROW(k.softmax_forward(nullptr, nullptr, 0, 5));
    CHECK_NOTHROW(k.log_softmax_forward(nullptr, nullptr, 3, 0));
    CHECK_NOTHROW(k.relu_forward(nullptr, nullptr, 0));
    CHECK_NOTHROW(k.gelu_backward(nullptr, nullptr, nullptr, 0));
    std::vector<float> dg(4, 7.0f), db(4, 7.0f);  // no rows: parameter gradients are zero
    k.layer_norm_backward(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, dg.data(),
                          db.data(), 0, 4);
    CHECK(dg == std::vector<float>(4, 0.0f));
    CHECK(db == std::vector<float>(4, 0.0f));
  }
}

TEST_CASE("core: backend names parse and auto resolves to a fixed backend") {
  CHECK(parse_backend("blas") == Backend::blas);
  CHECK(parse_backend("onednn") == Backend::onednn);
  CHECK(parse_backend("reference") == Backend::reference);
  CHECK(parse_backend("auto") == resolve_auto_backend());
  CHECK(std::string(backend_name(parse_backend("auto"))) != "auto");
  CHECK_THROWS_WITH_AS(parse_backend("mkl"), doctest::Contains("mkl"), Error);
}

TEST_CASE("core: OpenBLAS core names map to the vector width of their kernels") {
  CHECK(openblas_core_vector_bits("Haswell") == 256);
  CHECK(openblas_core_vector_bits("Zen") == 256);
  CHECK(openblas_core_vector_bits("SkylakeX") == 512);
  CHECK(openblas_core_vector_bits("COOPERLAKE") == 512);
  CHECK(openblas_core_vector_bits("Prescott") == 128);
  const BlasInfo info = blas_info();  // whatever this machine runs: consistent fields
  CHECK(info.core_vector_bits == openblas_core_vector_bits(info.core_name));
  CHECK(info.cpu_vector_bits >= 128);
  CHECK(openblas_core_vector_bits(info.best_core) == info.cpu_vector_bits);
}
