// The element-wise loops that no op's finite-difference check covers (core/elementwise.h).

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/elementwise.h"
#include "core/rng.h"
#include "core/sample_rng.h"

using namespace headlab;

namespace {

std::vector<int32_t> max_element_of_rows(const std::vector<float>& x, int64_t cols) {
  std::vector<int32_t> out;
  for (size_t r = 0; r * cols < x.size(); ++r) {
    const float* row = x.data() + r * cols;
    out.push_back(static_cast<int32_t>(std::max_element(row, row + cols) - row));
  }
  return out;
}

// Both builds: what runs here (AVX-512 where the CPU has it) and the portable loop.
std::vector<int32_t> argmax_of_rows(const std::vector<float>& x, int64_t cols) {
  std::vector<int32_t> out(x.size() / static_cast<size_t>(cols), -1);
  std::vector<int32_t> portable(out.size(), -2);
  const auto rows = static_cast<int64_t>(out.size());
  ew::argmax_rows(x.data(), rows, cols, out.data());
  ew::detail::argmax_rows_portable(x.data(), rows, cols, portable.data());
  CHECK(out == portable);
  return out;
}

}  // namespace

TEST_CASE("core: argmax_rows picks what std::max_element picks") {
  Rng rng(7);
  for (int64_t cols : {1, 3, 16, 17, 64, 100}) {
    CAPTURE(cols);
    std::vector<float> x(static_cast<size_t>(cols * 40));
    // Values from a few levels, so that rows hold ties for the maximum.
    for (float& v : x) v = static_cast<float>(rng.below(5)) - 2.0f;
    CHECK(argmax_of_rows(x, cols) == max_element_of_rows(x, cols));
    for (float& v : x) v = rng.normal();
    CHECK(argmax_of_rows(x, cols) == max_element_of_rows(x, cols));
  }
}

TEST_CASE("core: argmax_rows on infinities, signed zeros and NaN") {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<std::vector<float>> rows = {
      {-inf, -inf, -inf, -inf}, {-inf, 1, inf, inf}, {0.0f, -0.0f, -1, -2}, {-0.0f, 0.0f, -1, -2},
      {nan, 1, 2, 3},           {1, nan, 3, 2},      {1, 2, 3, nan},        {nan, nan, nan, nan},
  };
  for (const std::vector<float>& row : rows) {
    CAPTURE(row);
    CHECK(argmax_of_rows(row, 4) == max_element_of_rows(row, 4));
  }
}

TEST_CASE("core: sample-keyed dropout masks draw each row from its own generator, in order") {
  // Every row r must be what the scalar mask of rng.row(site, r) gives, bit for bit, however
  // many rows the vectorized path takes at once (eight) and whatever is left over.
  for (int64_t rows : {1, 7, 8, 9, 16, 35}) {
    for (int64_t per_row : {1, 7, 8, 17, 1156}) {
      for (float p : {0.0f, 0.15f, 0.5f}) {
        CAPTURE(rows);
        CAPTURE(per_row);
        CAPTURE(p);
        SampleRng rng(42);
        rng.set_position(3, 100);
        std::vector<float> mask(static_cast<size_t>(rows * per_row), -1.0f);
        ew::dropout_mask(rng, p, mask.data(), rows, rows * per_row);
        SampleRng again(42);
        again.set_position(3, 100);
        std::vector<float> want(mask.size());
        for (int64_t r = 0; r < rows; ++r) {
          Rng row = again.row(0, static_cast<uint64_t>(r));
          ew::dropout_mask(row, p, want.data() + r * per_row, per_row);
        }
        CHECK(std::memcmp(mask.data(), want.data(), mask.size() * sizeof(float)) == 0);
      }
    }
  }
}
