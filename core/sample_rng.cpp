#include "core/sample_rng.h"

namespace headlab {

void SampleRng::set_position(uint64_t step, uint64_t first_sample) {
  step_ = step;
  first_sample_ = first_sample;
  site_ = 0;
}

Rng SampleRng::row(uint64_t site, uint64_t row) const {
  return Rng::derive(Rng::derive(seed_, step_, first_sample_ + row).next_u64(), site);
}

}  // namespace headlab
