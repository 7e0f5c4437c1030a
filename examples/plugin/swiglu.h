#pragma once
// SwiGLU feed-forward block (Shazeer 2020, "GLU Variants Improve Transformer"):
//   FFN(x) = W2 (silu(x W1^T) * (x W3^T)),  silu(a) = a sigmoid(a)      [B, T, D] -> [B, T, D]
// built only from headlab's ops (linear, slice, sigmoid, mul), so its backward comes for free.
// W1 and W3 are one Linear "w13" [2 d_ff, D] (one GEMM), whose output is split with slice;
// "w2" is [D, d_ff]. Registered as "swiglu", kind feed_forward: [model] ffn_layer = "swiglu".

#include <cstdint>
#include <memory>

#include <headlab/layers/linear.h>
#include <headlab/layers/registry.h>

namespace example {

struct SwiGLUOptions {
  int64_t d_model = 0;
  int64_t d_ff = 0;
  bool bias = true;
};

class SwiGLU : public headlab::SequenceLayer {
 public:
  SwiGLU(const SwiGLUOptions& options, headlab::Rng& rng);
  headlab::Var forward(const headlab::Var& x) override;

  std::shared_ptr<headlab::Linear> w13, w2;

 private:
  SwiGLUOptions options_;
};

// Keys d_model and d_ff (inherited from [model]) and bias (true).
std::shared_ptr<headlab::SequenceLayer> make_swiglu(headlab::LayerOptions& options);
int64_t count_swiglu_parameters(headlab::LayerOptions& options);

}  // namespace example
