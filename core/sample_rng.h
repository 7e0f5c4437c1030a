#pragma once
// SampleRng: random streams keyed by where a sample (a sentence) sits in the step's global batch,
// not by the process or the slot that computes it. Every dropout mask of the model comes from
// here, so sentence k of step s gets the same masks whether one process computes it (in any
// micro-batch of gradient accumulation) or rank r of N does (docs/distributed.md).
//
// Row `row` of the `site`-th mask drawn since set_position(step, first_sample) comes from the
// generator
//     Rng::derive(Rng::derive(seed, step, first_sample + row).next_u64(), site)
// so it is a pure function of (seed, step, sample, site). A row is an index along the mask's
// leading dimension, which must be the sample (batch) dimension: [B, T, D] activations, [B, h,
// T, T] attention weights. A forward pass draws its masks in program order, so the n-th dropout
// call of a forward has site n in every process that runs that forward.
//
//   SampleRng rng(seed);
//   rng.set_position(step, first_sample);   // the trainer, before each micro-batch's forward
//   model.forward(...);                     // dropout(x, p, rng, training) at each site
//
// Without set_position the sites keep counting across forwards, so every forward gets fresh
// masks (what a plain training loop wants). Nothing here needs saving in a checkpoint.

#include <cstdint>

#include "core/rng.h"

namespace headlab {

class SampleRng {
 public:
  explicit SampleRng(uint64_t seed = 0) : seed_(seed) {}

  // The rows of the next masks are samples first_sample, first_sample + 1, ... of step `step`;
  // the site count starts again at 0.
  void set_position(uint64_t step, uint64_t first_sample);
  // Takes the next site number: 0, 1, 2, ... since set_position.
  uint64_t next_site() { return site_++; }
  // The generator of mask row `row` at `site` (see the top).
  Rng row(uint64_t site, uint64_t row) const;

  uint64_t seed() const { return seed_; }
  uint64_t step() const { return step_; }
  uint64_t first_sample() const { return first_sample_; }

 private:
  uint64_t seed_;
  uint64_t step_ = 0;
  uint64_t first_sample_ = 0;
  uint64_t site_ = 0;
};

}  // namespace headlab
