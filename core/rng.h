#pragma once
// Rng: xoshiro256** (Blackman & Vigna 2018), seeded through splitmix64. Uniform and normal
// draws are written here rather than taken from std::*_distribution, whose outputs differ
// between standard libraries; a seed gives the same stream on every platform. The state is
// four words and can be saved and restored exactly.

#include <array>
#include <cstdint>
#include <string>

namespace headlab {

class Rng {
 public:
  using State = std::array<uint64_t, 4>;

  explicit Rng(uint64_t seed = 0) { reseed(seed); }
  // An independent generator for (seed, stream): e.g. (run seed, step) for a data stream.
  static Rng derive(uint64_t seed, uint64_t stream);
  // derive(derive(seed, stream).next_u64(), substream): e.g. (data seed, step, sentence), so a
  // sentence is drawn alone from its own generator.
  static Rng derive(uint64_t seed, uint64_t stream, uint64_t substream);

  void reseed(uint64_t seed);
  // Inline: dropout masks draw one per attention weight.
  uint64_t next_u64() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }
  // Uniform integer in [0, n), unbiased (Lemire's multiply-and-reject). n > 0.
  uint64_t below(uint64_t n);
  // Uniform float in [0, 1) with 24 random bits.
  float uniform() { return static_cast<float>(next_u64() >> 40) * 0x1.0p-24f; }
  float uniform(float lo, float hi) { return lo + (hi - lo) * uniform(); }
  // Standard normal by Box-Muller in double; one value per call (no cached second value, so
  // the state stays four words).
  float normal();
  float normal(float mean, float std) { return mean + std * normal(); }

  State state() const { return s_; }
  void set_state(const State& state);
  // "xoshiro256**:<16 hex>x4", and back; parse throws headlab::Error on malformed text.
  std::string state_string() const;
  static State parse_state(const std::string& text);

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  State s_{};
};

}  // namespace headlab
