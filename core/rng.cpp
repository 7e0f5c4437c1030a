#include "core/rng.h"

#include <cmath>
#include <cstdio>

#include "core/error.h"

namespace headlab {
namespace {

uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

Rng Rng::derive(uint64_t seed, uint64_t stream) {
  uint64_t x = seed;
  uint64_t mixed = splitmix64(x) ^ (stream * 0xD1B54A32D192ED03ull + 0x8CB92BA72F3D8DD7ull);
  return Rng(mixed);
}

Rng Rng::derive(uint64_t seed, uint64_t stream, uint64_t substream) {
  return derive(derive(seed, stream).next_u64(), substream);
}

void Rng::reseed(uint64_t seed) {
  uint64_t x = seed;
  for (auto& w : s_) w = splitmix64(x);
}

uint64_t Rng::below(uint64_t n) {
  HEADLAB_ASSERT(n > 0);
  unsigned __int128 m = static_cast<unsigned __int128>(next_u64()) * n;
  auto low = static_cast<uint64_t>(m);
  if (low < n) {
    const uint64_t threshold = (0 - n) % n;
    while (low < threshold) {
      m = static_cast<unsigned __int128>(next_u64()) * n;
      low = static_cast<uint64_t>(m);
    }
  }
  return static_cast<uint64_t>(m >> 64);
}

float Rng::normal() {
  // u1 in (0, 1] so the log is finite; 53-bit uniforms.
  const double u1 = (static_cast<double>(next_u64() >> 11) + 1.0) * 0x1.0p-53;
  const double u2 = static_cast<double>(next_u64() >> 11) * 0x1.0p-53;
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2));
}

void Rng::set_state(const State& state) {
  if (state[0] == 0 && state[1] == 0 && state[2] == 0 && state[3] == 0)
    fail("rng: the all-zero state is invalid for xoshiro256**");
  s_ = state;
}

std::string Rng::state_string() const {
  char buf[96];
  std::snprintf(buf, sizeof buf, "xoshiro256**:%016llx%016llx%016llx%016llx",
                static_cast<unsigned long long>(s_[0]), static_cast<unsigned long long>(s_[1]),
                static_cast<unsigned long long>(s_[2]), static_cast<unsigned long long>(s_[3]));
  return buf;
}

Rng::State Rng::parse_state(const std::string& text) {
  const std::string prefix = "xoshiro256**:";
  if (text.size() != prefix.size() + 64 || text.compare(0, prefix.size(), prefix) != 0)
    fail("rng: state '{}' is not 'xoshiro256**:' followed by 64 hex digits", text.substr(0, 100));
  State s{};
  for (int w = 0; w < 4; ++w) {
    uint64_t v = 0;
    for (int i = 0; i < 16; ++i) {
      const char c = text[prefix.size() + w * 16 + i];
      int digit;
      if (c >= '0' && c <= '9')
        digit = c - '0';
      else if (c >= 'a' && c <= 'f')
        digit = c - 'a' + 10;
      else
        fail("rng: state has non-hex character '{}'", c);
      v = v << 4 | static_cast<uint64_t>(digit);
    }
    s[w] = v;
  }
  return s;
}

}  // namespace headlab
