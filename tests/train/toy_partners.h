#pragma once
// The hand-made batch the head-metric and baseline tests share: B = 2 sequences of T = 6
// tokens, position 0 BOS, and two relations: PREV(i) = i - 1 and FAR(i) = (i + 2) mod T, mapped
// away from BOS to 1 so it is never 0.

#include <cstdint>
#include <vector>

namespace headlab::toy_partners {

inline constexpr int64_t B = 2, T = 6;

inline std::vector<std::vector<int32_t>> make_partners() {
  std::vector<std::vector<int32_t>> p(2, std::vector<int32_t>(B * T, -1));
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t i = 1; i < T; ++i) {
      p[0][b * T + i] = static_cast<int32_t>(i - 1);
      const int64_t far = (i + 2) % T;
      p[1][b * T + i] = static_cast<int32_t>(far == 0 ? 1 : far);
    }
  }
  return p;
}

// The counted queries: every token but BOS.
inline std::vector<uint8_t> non_bos() {
  std::vector<uint8_t> m(B * T, 1);
  for (int64_t b = 0; b < B; ++b) m[b * T] = 0;
  return m;
}

}  // namespace headlab::toy_partners
