// headlab's own AVX-512 GEMM (core/kernels/simd/gemm.h, the onednn backend's products where the CPU
// has AVX-512): beta = 1 adds exactly the beta = 0 result (gradient accumulation over
// micro-batches equals the sum of separately computed terms), and the result does not depend on
// the thread count. Its parity with the reference is in test_kernels.cpp and
// test_fused_kernels.cpp.

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "core/kernels/kernels.h"
#include "core/kernels/simd/gemm.h"
#include "core/rng.h"
#include "core/threads.h"
#include "tests/core/kernel_test_util.h"

using namespace headlab;
using namespace headlab::kernel_test;

namespace {

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Descriptors with tails in every dimension, both transposes, k longer than the L2 row block,
// alpha != 1 and batches.
std::vector<GemmDesc> shapes() {
  std::vector<GemmDesc> out;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      out.push_back({.trans_a = ta, .trans_b = tb, .m = 37, .n = 45, .k = 19});
      out.push_back({.trans_a = ta, .trans_b = tb, .m = 130, .n = 70, .k = 900, .alpha = 0.125f});
      out.push_back({.trans_a = ta, .trans_b = tb, .m = 17, .n = 33, .k = 40, .batch = 5});
    }
  return out;
}

std::vector<float> run(const GemmDesc& d, const std::vector<float>& a, const std::vector<float>& b,
                       std::vector<float> c) {
  kernels_for(Backend::onednn).gemm(d, a.data(), b.data(), c.data());
  return c;
}

}  // namespace

TEST_CASE("core: own gemm with beta 1 adds exactly the beta 0 result to C") {
  if (!fast::own_gemm_available()) return;  // oneDNN's matmul runs there instead
  Rng rng(81);
  for (GemmDesc d : shapes()) {
    const size_t na = d.batch * d.m * d.k, nb = d.batch * d.k * d.n, nc = d.batch * d.m * d.n;
    const auto a = random_vec(na, rng), b = random_vec(nb, rng), c0 = random_vec(nc, rng);
    d.beta = 0.0f;
    const std::vector<float> product = run(d, a, b, std::vector<float>(nc, 7.0f));
    d.beta = 1.0f;
    const std::vector<float> accumulated = run(d, a, b, c0);
    std::vector<float> want(nc);
    for (size_t i = 0; i < nc; ++i) want[i] = c0[i] + product[i];
    INFO("m=", d.m, " n=", d.n, " k=", d.k, " batch=", d.batch, " ta=", d.trans_a,
         " tb=", d.trans_b);
    CHECK(same_bits(accumulated, want));
  }
}

TEST_CASE("core: own gemm gives the same bits on 1 and 2 threads, and on every run") {
  // A claim about headlab's own GEMM: oneDNN's matmul, which the backend runs on a CPU without
  // AVX-512, may split k over threads and then differs in the last bits.
  if (!fast::own_gemm_available()) return;
  Rng rng(82);
  const int saved = num_threads();
  for (GemmDesc d : shapes()) {
    d.m *= 4;  // enough work for two threads
    const size_t na = d.batch * d.m * d.k, nb = d.batch * d.k * d.n, nc = d.batch * d.m * d.n;
    const auto a = random_vec(na, rng), b = random_vec(nb, rng);
    set_num_threads(1);
    const std::vector<float> one = run(d, a, b, std::vector<float>(nc));
    set_num_threads(2);
    const std::vector<float> two = run(d, a, b, std::vector<float>(nc));
    const std::vector<float> again = run(d, a, b, std::vector<float>(nc));
    INFO("m=", d.m, " n=", d.n, " k=", d.k, " batch=", d.batch);
    CHECK(same_bits(one, two));
    CHECK(same_bits(two, again));
  }
  set_num_threads(saved);
}

TEST_CASE("core: own gemm sums each element's k terms in order, one FMA each, in one accumulator") {
  // The claim the two cases above rest on, checked against a scalar loop bit for bit, for every
  // transpose and for more rows than columns and fewer.
  if (!fast::own_gemm_available()) return;
  Rng rng(83);
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (auto [m, n] : {std::pair<int64_t, int64_t>{21, 75}, {75, 21}, {32, 128}}) {
        GemmDesc d{
            .trans_a = ta, .trans_b = tb, .m = m, .n = n, .k = 301, .alpha = 0.125f, .beta = 0.5f};
        const GemmDesc r = d.resolved();
        const auto a = random_vec(m * d.k, rng), b = random_vec(d.k * n, rng);
        const auto c0 = random_vec(m * n, rng);
        std::vector<float> want(c0);
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) {
            float acc = 0.0f;
            for (int64_t p = 0; p < d.k; ++p)
              acc = std::fma(ta ? a[p * r.lda + i] : a[i * r.lda + p],
                             tb ? b[j * r.ldb + p] : b[p * r.ldb + j], acc);
            want[i * n + j] = std::fma(d.beta, c0[i * n + j], acc * d.alpha);
          }
        INFO("m=", m, " n=", n, " ta=", ta, " tb=", tb);
        CHECK(same_bits(run(d, a, b, c0), want));
      }
}
