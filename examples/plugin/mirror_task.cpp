#include "mirror_task.h"

#include <headlab/core/error.h>
#include <headlab/core/rng.h>

namespace example {

using namespace headlab;

MirrorTask::MirrorTask(int64_t length, int64_t digits) : length_(length), digits_(digits) {
  features_ = {{"token", digits + 1}};
}

void MirrorTask::generate(uint64_t seed, int64_t index, int64_t batch_size, Batch& out) const {
  if (batch_size < 1) fail("mirror task: batch_size is {} but expected >= 1", batch_size);
  if (index < 0) fail("mirror task: batch index is {} but expected >= 0", index);
  const int64_t T = seq_len(), n = length_;
  out.resize(batch_size, T, features_.size(), relations_.size());
  Rng rng = Rng::derive(seed, static_cast<uint64_t>(index));  // a pure function of (seed, index)
  for (int64_t b = 0; b < batch_size; ++b) {
    int32_t* token = out.features[0].data() + b * T;
    token[0] = static_cast<int32_t>(digits_);  // BOS
    for (int64_t t = 1; t <= n; ++t) token[t] = static_cast<int32_t>(rng.below(digits_));
    for (int64_t t = 0; t <= n; ++t) {
      const size_t i = static_cast<size_t>(b * T + t);
      if (t == 0) {
        out.labels[i] = kIgnoreIndex;
        out.partners[0][i] = out.partners[1][i] = kNoPartner;
        continue;
      }
      const int64_t prev = t == 1 ? n : t - 1, mirror = n + 1 - t;
      out.partners[0][i] = static_cast<int32_t>(prev);
      out.partners[1][i] = static_cast<int32_t>(mirror);
      out.labels[i] = static_cast<int32_t>(token[prev] * digits_ + token[mirror]);
    }
  }
}

bool MirrorTask::relation_correct(int32_t predicted, int32_t gold, int relation) const {
  const auto k = static_cast<int32_t>(digits_);
  return relation == 0 ? predicted / k == gold / k : predicted % k == gold % k;
}

std::string MirrorTask::token_string(const std::vector<std::vector<int32_t>>& features,
                                     int64_t index) const {
  const int32_t id = features[0][static_cast<size_t>(index)];
  return id == digits_ ? "BOS" : std::to_string(id);
}

std::unique_ptr<Task> make_mirror_task(TaskOptions& o) {
  const int64_t length = o.get_int(
      "length", 8, OptionSpec::integer(2, 64).shaped().documented("Digits per sentence (n)."));
  const int64_t digits = o.get_int(
      "digits", 4, OptionSpec::integer(2, 16).shaped().documented("Distinct digits (K)."));
  return std::make_unique<MirrorTask>(length, digits);
}

}  // namespace example
