#pragma once
// The small two-feature encoder and token batch the hook tests run (test_hooks.cpp,
// test_hook_starts.cpp), and a bitwise comparison of their results.

#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "core/rng.h"
#include "layers/encoder.h"

namespace headlab::hook_test {

inline EncoderOptions options(NormPosition norm = NormPosition::pre, int64_t layers = 2) {
  EncoderOptions o;
  o.vocab_sizes = {7, 3};
  o.max_len = 6;
  o.d_model = 8;
  o.heads = 2;
  o.layers = layers;
  o.d_ff = 12;
  o.num_classes = 5;
  o.norm = norm;
  return o;
}

// Three sentences of five tokens.
struct Ids {
  std::vector<int32_t> cat, col;
  int64_t b = 3, t = 5;
  EncoderOutput run(Encoder& m, bool need_weights = false) const {
    return m.forward({std::span<const int32_t>(cat), std::span<const int32_t>(col)}, b, t, nullptr,
                     need_weights);
  }
  // The logits, copied (the next forward may reuse their buffer).
  Tensor logits(Encoder& m, bool need_weights = false) const {
    return run(m, need_weights).logits.value().clone();
  }
};

inline Ids ids(const EncoderOptions& o) {
  Rng rng(5);
  Ids x;
  for (int64_t i = 0; i < x.b * x.t; ++i) {
    x.cat.push_back(static_cast<int32_t>(rng.below(o.vocab_sizes[0])));
    x.col.push_back(static_cast<int32_t>(rng.below(o.vocab_sizes[1])));
  }
  return x;
}

inline bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() &&
         std::memcmp(a.data(), b.data(), static_cast<size_t>(a.numel()) * sizeof(float)) == 0;
}

}  // namespace headlab::hook_test
