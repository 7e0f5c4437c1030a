// The element-wise loops that no op's finite-difference check covers (core/elementwise.h).

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/elementwise.h"
#include "core/rng.h"

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

std::vector<int32_t> argmax_of_rows(const std::vector<float>& x, int64_t cols) {
  std::vector<int32_t> out(x.size() / static_cast<size_t>(cols), -1);
  ew::argmax_rows(x.data(), static_cast<int64_t>(out.size()), cols, out.data());
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
      {nan, 1, 2, 3},           {1, nan, 3, 2},      {1, 2, 3, nan},       {nan, nan, nan, nan},
  };
  for (const std::vector<float>& row : rows) {
    CAPTURE(row);
    CHECK(argmax_of_rows(row, 4) == max_element_of_rows(row, 4));
  }
}
