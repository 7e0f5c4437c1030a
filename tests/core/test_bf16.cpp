// The bf16 products (Precision::bf16, runtime.precision = "bf16"): within the bound bf16's
// rounding of the operands allows of the fp32 product, exactly the fp32-accumulated product of
// the rounded operands up to fp32 rounding, the same bits on every call and at every thread
// count, beta = 1 adding exactly the beta = 0 result, and refused on a CPU without AVX512_BF16.
// Skipped (with a message) on such a CPU, but the refusal.

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <vector>

#include "core/error.h"
#include "core/kernels/kernels.h"
#include "core/kernels/simd/gemm.h"
#include "core/rng.h"
#include "core/threads.h"

using namespace headlab;

namespace {

// bf16 round to nearest even, as the kernels round (no NaN or subnormal here).
float to_bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  float y;
  std::memcpy(&y, &u, sizeof y);
  return y;
}

std::vector<float> random_values(int64_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = static_cast<float>(rng.normal());
  return v;
}

// Restores fp32 products at the end of a test.
struct Bf16Scope {
  Bf16Scope() { set_precision(Precision::bf16); }
  ~Bf16Scope() { set_precision(Precision::fp32); }
};

struct Case {
  const char* name;
  GemmDesc d;
  bool bias = false, relu = false;
};

// Tails in every dimension (the register block is 12 x 32, k runs in pairs), both transposes, an
// A too long for one L2 block of rows, and a batch.
std::vector<Case> cases() {
  return {
      {"plain 64x96x200", {.m = 64, .n = 96, .k = 200}},
      {"dX = dY W^T", {.trans_b = true, .m = 70, .n = 48, .k = 130}},
      {"dW = X^T dY + C", {.trans_a = true, .m = 40, .n = 33, .k = 517, .beta = 1.0f}},
      {"alpha, odd k", {.trans_b = true, .m = 17, .n = 17, .k = 9, .alpha = 0.25f}},
      {"linear with bias and ReLU", {.trans_b = true, .m = 50, .n = 64, .k = 96}, true, true},
      {"both transposed", {.trans_a = true, .trans_b = true, .m = 13, .n = 45, .k = 77}},
      {"1 x 1 x 1", {.m = 1, .n = 1, .k = 1}},
      {"long k: three L2 blocks of A", {.m = 130, .n = 70, .k = 3001}},
      {"a batch", {.trans_b = true, .m = 25, .n = 40, .k = 33, .alpha = 0.5f, .batch = 3}},
  };
}

// C of case c in bf16. Single products through the backend, as the layers run them; the batched
// one through the bf16 GEMM itself, whose contract has batches, since the backend keeps batched
// products fp32 (checked below).
void product(const Case& c, const float* a, const float* b, const float* bias, float* out) {
  if (c.d.batch > 1) return fast::gemm_bf16(c.d, a, b, out);
  if (c.bias || c.relu)
    return kernels_for(Backend::onednn)
        .gemm_bias_act(c.d, a, b, c.bias ? bias : nullptr, c.relu, out);
  kernels_for(Backend::onednn).gemm(c.d, a, b, out);
}

bool same_bits(const std::vector<float>& x, const std::vector<float>& y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

// op(X)(i, p) of a stored operand.
float at(const float* x, bool trans, int64_t ld, int64_t i, int64_t p) {
  return trans ? x[p * ld + i] : x[i * ld + p];
}

}  // namespace

TEST_CASE("core: bf16 products are within the bf16 rounding bound of fp32") {
  if (!bf16_supported()) {
    MESSAGE("skipped: this CPU has no AVX512_BF16");
    return;
  }
  // Bound per element of C = sum_p a_p b_p, with u = 2^-8 (bf16 keeps 8 significant bits, so
  // round to nearest errs by at most half a unit in the 8th bit: |bf16(x) - x| <= 2^-8 |x|):
  // each term a_p b_p becomes a_p (1 + e1) b_p (1 + e2), |e1|, |e2| <= u, an error of at most
  // (2u + u^2) |a_p b_p|; the fp32 accumulation of k terms adds at most k 2^-24 sum |a_p b_p|
  // (and the alpha scale, beta sum and bias a few fp32 roundings of |C|). So
  //   |C_bf16 - C_exact| <= (2u + u^2 + (k + 4) 2^-24) sum_p |a_p b_p| + 4 2^-24 |C|.
  // That bound holds for the worst signs; with random signs the error is about sqrt(k) times
  // smaller, which is why the products also differ from fp32 well beyond fp32's own rounding
  // (checked below: the bf16 path really ran).
  // Against the fp32-accumulated product of the rounded operands the bound is only the fp32
  // rounding: (k + 4) 2^-24 sum |bf16(a_p) bf16(b_p)| + 4 2^-24 |C|.
  const double u = std::ldexp(1.0, -8), eps = std::ldexp(1.0, -24);
  const Bf16Scope bf16;
  for (const Case& c : cases()) {
    CAPTURE(c.name);
    const GemmDesc d = c.d.resolved();
    const int64_t na = d.batch * d.stride_a, nb = d.batch * d.stride_b, nc = d.batch * d.stride_c;
    const std::vector<float> a = random_values(na, 1), b = random_values(nb, 2),
                             bias = random_values(d.n, 3), c0 = random_values(nc, 4);
    std::vector<float> out = c0;
    product(c, a.data(), b.data(), bias.data(), out.data());
    double worst_vs_exact = 0.0, worst_vs_rounded = 0.0, beyond_fp32 = 0.0;
    for (int64_t bi = 0; bi < d.batch; ++bi)
      for (int64_t i = 0; i < d.m; ++i)
        for (int64_t j = 0; j < d.n; ++j) {
          const float* ab = a.data() + bi * d.stride_a;
          const float* bb = b.data() + bi * d.stride_b;
          double exact = 0.0, abs_sum = 0.0, rounded = 0.0, rounded_abs = 0.0;
          for (int64_t p = 0; p < d.k; ++p) {
            const float x = at(ab, d.trans_a, d.lda, i, p), y = at(bb, !d.trans_b, d.ldb, j, p);
            exact += static_cast<double>(x) * y;
            abs_sum += std::fabs(static_cast<double>(x) * y);
            const double rx = to_bf16(x), ry = to_bf16(y);
            rounded += rx * ry;
            rounded_abs += std::fabs(rx * ry);
          }
          const double old = c0[static_cast<size_t>(bi * d.stride_c + i * d.ldc + j)];
          auto finish = [&](double s) {
            double v = d.alpha * s + d.beta * old + (c.bias ? bias[static_cast<size_t>(j)] : 0.0);
            return c.relu && v < 0.0 ? 0.0 : v;
          };
          const double got = out[static_cast<size_t>(bi * d.stride_c + i * d.ldc + j)];
          const double scale = std::fabs(d.alpha);
          const double fp32_part = 4.0 * eps * std::fabs(got) + 4.0 * eps * std::fabs(old);
          const double bound_exact =
              scale * (2.0 * u + u * u + (d.k + 4) * eps) * abs_sum + fp32_part;
          const double bound_rounded = scale * (d.k + 4) * eps * rounded_abs + fp32_part;
          // ReLU is 1-Lipschitz: the bounds hold through it.
          worst_vs_exact = std::max(worst_vs_exact, std::fabs(got - finish(exact)) / bound_exact);
          worst_vs_rounded =
              std::max(worst_vs_rounded, std::fabs(got - finish(rounded)) / bound_rounded);
          beyond_fp32 = std::max(beyond_fp32, std::fabs(got - finish(exact)) / bound_rounded);
        }
    CHECK(worst_vs_exact <= 1.0);
    CHECK(worst_vs_rounded <= 1.0);
    CHECK(beyond_fp32 > 1.0);  // not an fp32 product
  }
  // The backend's batched products stay fp32 (onednn.cpp): the same bits as at Precision::fp32.
  const GemmDesc batched{.trans_b = true, .m = 16, .n = 16, .k = 16, .alpha = 0.5f, .batch = 8};
  const std::vector<float> a = random_values(8 * 256, 8), b = random_values(8 * 256, 9);
  std::vector<float> in_bf16(8 * 256), in_fp32(8 * 256);
  kernels_for(Backend::onednn).gemm(batched, a.data(), b.data(), in_bf16.data());
  set_precision(Precision::fp32);
  kernels_for(Backend::onednn).gemm(batched, a.data(), b.data(), in_fp32.data());
  set_precision(Precision::bf16);
  CHECK(in_bf16 == in_fp32);
}

TEST_CASE("core: bf16 products give the same bits on 1 and 2 threads, and on every call") {
  // Each C element's k terms are summed in one accumulator in a fixed order, and threads take
  // whole blocks of rows (simd/gemm_bf16.cpp).
  if (!bf16_supported()) {
    MESSAGE("skipped: this CPU has no AVX512_BF16");
    return;
  }
  const Bf16Scope bf16;
  const int saved = num_threads();
  for (Case c : cases()) {
    CAPTURE(c.name);
    c.d.m *= 4;  // enough work for two threads
    const GemmDesc d = c.d.resolved();
    const std::vector<float> a = random_values(d.batch * d.stride_a, 5),
                             b = random_values(d.batch * d.stride_b, 6),
                             c0 = random_values(d.batch * d.stride_c, 7),
                             bias = random_values(d.n, 8);
    std::vector<float> one = c0, two = c0, again = c0;
    set_num_threads(1);
    product(c, a.data(), b.data(), bias.data(), one.data());
    set_num_threads(2);
    product(c, a.data(), b.data(), bias.data(), two.data());
    product(c, a.data(), b.data(), bias.data(), again.data());
    CHECK(same_bits(one, two));
    CHECK(same_bits(two, again));
  }
  set_num_threads(saved);
}

TEST_CASE("core: a bf16 product with beta 1 adds exactly the beta 0 result to C") {
  // What gradient accumulation over micro-batches rests on, as in fp32.
  if (!bf16_supported()) {
    MESSAGE("skipped: this CPU has no AVX512_BF16");
    return;
  }
  const Bf16Scope bf16;
  for (Case c : cases()) {
    if (c.bias || c.relu) continue;  // they come with beta 0 only
    CAPTURE(c.name);
    const GemmDesc d = c.d.resolved();
    const std::vector<float> a = random_values(d.batch * d.stride_a, 11),
                             b = random_values(d.batch * d.stride_b, 12),
                             c0 = random_values(d.batch * d.stride_c, 13);
    c.d.beta = 0.0f;
    std::vector<float> alone(c0.size(), 7.0f), added = c0;
    product(c, a.data(), b.data(), nullptr, alone.data());
    c.d.beta = 1.0f;
    product(c, a.data(), b.data(), nullptr, added.data());
    std::vector<float> want(c0.size());
    for (size_t i = 0; i < want.size(); ++i) want[i] = c0[i] + alone[i];
    CHECK(same_bits(added, want));
  }
}

TEST_CASE("core: a NaN operand gives NaN in the bf16 product, and only where it enters") {
  if (!bf16_supported()) {
    MESSAGE("skipped: this CPU has no AVX512_BF16");
    return;
  }
  const Bf16Scope bf16;
  for (bool trans_a : {false, true}) {
    CAPTURE(trans_a);
    const GemmDesc d = GemmDesc{.trans_a = trans_a, .m = 20, .n = 40, .k = 31}.resolved();
    std::vector<float> a = random_values(d.m * d.k, 14), b = random_values(d.k * d.n, 15);
    a[trans_a ? 5 * d.lda + 3 : 3 * d.lda + 5] = std::nanf("");  // op(A)(3, 5)
    std::vector<float> out(d.m * d.n);
    kernels_for(Backend::onednn).gemm(d, a.data(), b.data(), out.data());
    for (int64_t i = 0; i < d.m; ++i)
      for (int64_t j = 0; j < d.n; ++j) {
        CAPTURE(i);
        CHECK(std::isnan(out[i * d.n + j]) == (i == 3));
      }
  }
}

TEST_CASE("core: precision bf16 is refused on a CPU without AVX512_BF16, and fp32 is the default") {
  CHECK(current_precision() == Precision::fp32);
  CHECK(std::string(precision_name(Precision::bf16)) == "bf16");
  CHECK(std::string(precision_name(Precision::fp32)) == "fp32");
  if (bf16_supported()) {
    CHECK_NOTHROW(set_precision(Precision::bf16));
    CHECK(current_precision() == Precision::bf16);
  } else {
    CHECK_THROWS_WITH_AS(set_precision(Precision::bf16), doctest::Contains("AVX512_BF16"), Error);
    CHECK(current_precision() == Precision::fp32);
  }
  set_precision(Precision::fp32);
  CHECK(current_precision() == Precision::fp32);
}

TEST_CASE("core: the bf16 linear backward masks and sums g while packing it, as the composed ops") {
  // Kernels::linear_backward at bf16 (onednn backend) fuses the ReLU mask and the bias gradient
  // into the products' packing of g; the default composes bias_act_backward and two gemm calls.
  // The products see the same masked values, so dx and dW have the same bits; db is summed in
  // another order (each column in row order, against blocks of rows), so within fp32 rounding.
  if (!bf16_supported()) {
    MESSAGE("skipped: this CPU has no AVX512_BF16");
    return;
  }
  const Bf16Scope bf16;
  const Kernels& k = kernels_for(Backend::onednn);
  // The second shape has dW's rows (out) in several L2 blocks (k = rows is long).
  for (auto [rows, in, out] : {std::tuple<int64_t, int64_t, int64_t>{70, 45, 38}, {3000, 40, 150}})
    for (bool relu : {false, true})
      for (bool accumulate : {false, true}) {
        CAPTURE(rows);
        CAPTURE(relu);
        CAPTURE(accumulate);
        const std::vector<float> g = random_values(rows * out, 21),
                                 y = random_values(rows * out, 22),
                                 x = random_values(rows * in, 23), w = random_values(out * in, 24),
                                 dx0 = random_values(rows * in, 25),
                                 dw0 = random_values(out * in, 26);
        std::vector<float> dx[2] = {dx0, dx0}, dw[2] = {dw0, dw0}, db[2];
        for (int fused = 0; fused < 2; ++fused) {
          db[fused].assign(out, 7.0f);
          const Kernels::LinearGrads grads{.dx = dx[fused].data(),
                                           .accumulate_dx = accumulate,
                                           .dw = dw[fused].data(),
                                           .accumulate_dw = accumulate,
                                           .db = db[fused].data()};
          const float* yp = relu ? y.data() : nullptr;
          if (fused)
            k.linear_backward(g.data(), yp, x.data(), w.data(), rows, in, out, grads);
          else
            k.Kernels::linear_backward(g.data(), yp, x.data(), w.data(), rows, in, out, grads);
        }
        CHECK(same_bits(dx[0], dx[1]));
        CHECK(same_bits(dw[0], dw[1]));
        for (int64_t j = 0; j < out; ++j) {
          double abs_sum = 0.0, exact = 0.0;
          for (int64_t r = 0; r < rows; ++r) {
            const float v = !relu || y[r * out + j] > 0.0f ? g[r * out + j] : 0.0f;
            abs_sum += std::fabs(v);
            exact += v;
          }
          CAPTURE(j);
          CHECK(std::fabs(db[1][j] - exact) <= rows * std::ldexp(1.0, -24) * abs_sum);
          CHECK(std::fabs(db[0][j] - db[1][j]) <= 2 * rows * std::ldexp(1.0, -24) * abs_sum);
        }
      }
}
