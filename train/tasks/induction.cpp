#include "train/tasks/induction.h"

#include <algorithm>
#include <numeric>

#include <fmt/format.h>

#include "core/error.h"
#include "core/rng.h"
#include "train/tasks/registry.h"

namespace headlab {

InductionTask::InductionTask(const InductionOptions& o) : options_(o) {
  if (o.min_segment < 1)
    fail("task.min_segment = {} is out of range: expected >= 1", o.min_segment);
  if (o.max_segment < o.min_segment)
    fail("task.max_segment = {} is below task.min_segment = {}", o.max_segment, o.min_segment);
  if (2 * o.max_segment > o.length - 1)
    fail(
        "task.max_segment = {} is too long for task.length = {}: both copies must fit after BOS "
        "(expected max_segment <= {})",
        o.max_segment, o.length, (o.length - 1) / 2);
  if (o.tokens == InductionTokens::kDistinct && o.vocab < o.length - 1 - o.min_segment)
    fail(
        "task.vocab = {} is too small: the fresh tokens of a sequence are distinct, so expected "
        "vocab >= length - 1 - min_segment = {}",
        o.vocab, o.length - 1 - o.min_segment);
  features_ = {{"token", o.vocab + 1}};
  relations_ = {"PREV_TOKEN", "INDUCTION"};
}

void InductionTask::generate_sentences(uint64_t seed, int64_t index, int64_t first, int64_t count,
                                       Batch& out) const {
  if (count < 1) fail("induction task: batch_size is {} but expected >= 1", count);
  if (index < 0) fail("induction task: batch index is {} but expected >= 0", index);
  if (first < 0) fail("induction task: first sentence is {} but expected >= 0", first);
  const int64_t T = options_.length, V = options_.vocab;
  out.resize(count, T, 1, 2);
  // V ids to shuffle, or (uniform tokens) up to T - 1 - min_segment draws.
  std::vector<int32_t> pool(static_cast<size_t>(std::max(V, T - 1 - options_.min_segment)));
  std::vector<int32_t> last(static_cast<size_t>(V + 1), -1);  // last position of each id
  std::vector<int32_t>& tokens = out.features[0];
  for (int64_t b = 0; b < count; ++b) {
    Rng rng = Rng::derive(seed, static_cast<uint64_t>(index), static_cast<uint64_t>(first + b));
    const int64_t span = options_.max_segment - options_.min_segment + 1;
    const int64_t L = options_.min_segment + static_cast<int64_t>(rng.below(span));
    const int64_t fresh = T - 1 - L, filler = T - 1 - 2 * L;
    // The runs of fresh tokens before and between the copies (the rest follows the second).
    int64_t before = filler, between = 0;
    if (options_.layout == InductionLayout::kRandom) {
      // Two distinct bars among filler + 2 slots: lo fresh tokens, a bar, hi - lo - 1, a bar.
      int64_t lo = static_cast<int64_t>(rng.below(filler + 2));
      int64_t hi = static_cast<int64_t>(rng.below(filler + 1));
      if (hi >= lo) ++hi;
      if (hi < lo) std::swap(lo, hi);
      before = lo;
      between = hi - lo - 1;
    }
    if (options_.tokens == InductionTokens::kUniform) {
      for (int64_t i = 0; i < fresh; ++i)
        pool[static_cast<size_t>(i)] = static_cast<int32_t>(rng.below(V));
    } else {
      std::iota(pool.begin(), pool.end(), 0);
      for (int64_t i = 0; i < fresh; ++i)
        std::swap(pool[static_cast<size_t>(i)],
                  pool[static_cast<size_t>(i + static_cast<int64_t>(rng.below(V - i)))]);
    }
    const int64_t row = b * T;
    tokens[static_cast<size_t>(row)] = static_cast<int32_t>(V);  // BOS
    // pool[0, before) the first run, pool[before, before + L) the segment, the rest the runs
    // between and after the copies; the second copy reads the segment again.
    const int64_t second = 1 + before + L + between;  // where the second copy starts
    int64_t next = 0;
    for (int64_t t = 1; t < T; ++t) {
      const bool repeat = t >= second && t < second + L;
      const int64_t k = repeat ? before + (t - second) : next++;
      tokens[static_cast<size_t>(row + t)] = pool[static_cast<size_t>(k)];
    }
    for (int64_t t = 0; t < T; ++t) {
      const auto at = static_cast<size_t>(row + t);
      out.labels[at] = t + 1 < T ? tokens[at + 1] : kIgnoreIndex;
      out.partners[kPrevToken][at] = t == 0 ? kNoPartner : static_cast<int32_t>(t - 1);
      int32_t& seen = last[static_cast<size_t>(tokens[at])];
      out.partners[kInduction][at] = seen < 0 ? kNoPartner : seen + 1;
      seen = static_cast<int32_t>(t);
    }
    for (int64_t t = 0; t < T; ++t)
      last[static_cast<size_t>(tokens[static_cast<size_t>(row + t)])] = -1;
  }
}

std::string InductionTask::token_string(const std::vector<std::vector<int32_t>>& features,
                                        int64_t index) const {
  const int32_t id = features[0][static_cast<size_t>(index)];
  return id == options_.vocab ? "BOS" : std::to_string(id);
}

std::unique_ptr<Task> make_induction_task(TaskOptions& o) {
  const InductionOptions defaults;
  InductionOptions d;
  d.vocab = o.get_int(
      "vocab", defaults.vocab,
      OptionSpec::integer(2, 65536).shaped().documented("Tokens V (the classes; BOS is id V)."));
  d.length = o.get_int(
      "length", defaults.length,
      OptionSpec::integer(3, 4096).shaped().documented("Positions T per sequence, BOS included."));
  d.min_segment = o.get_int("min_segment", defaults.min_segment,
                            OptionSpec::integer(1, 2048).documented(
                                "Shortest repeated segment L (uniform per sequence)."));
  d.max_segment = o.get_int(
      "max_segment", defaults.max_segment,
      OptionSpec::integer(1, 2048).documented("Longest repeated segment L; 2 L <= length - 1."));
  const std::string layout = o.get_string(
      "layout", "end",
      OptionSpec::one_of({"end", "random"})
          .documented("Where the two copies go: \"end\" (the second ends the sequence) or "
                      "\"random\" (fresh tokens before, between and after them)."));
  d.layout = layout == "random" ? InductionLayout::kRandom : InductionLayout::kEnd;
  const std::string tokens = o.get_string(
      "tokens", "distinct",
      OptionSpec::one_of({"distinct", "uniform"})
          .documented("How the tokens outside the second copy are drawn: \"distinct\" (without "
                      "replacement: the copy is the only repetition) or \"uniform\" (each "
                      "uniform in [0, V): tokens also recur by chance)."));
  d.tokens = tokens == "uniform" ? InductionTokens::kUniform : InductionTokens::kDistinct;
  // The checks across keys name the key and, when the config gave it, its position.
  try {
    return std::make_unique<InductionTask>(d);
  } catch (const Error& e) {
    for (const char* key : {"max_segment", "vocab", "min_segment"}) {
      const std::string message = e.what();
      const OptionValue* given = o.resolved().find(key);
      if (message.starts_with(fmt::format("task.{} ", key)) && given && !given->where.empty())
        throw Error(fmt::format("{}: {}", given->where, message));
    }
    throw;
  }
}

}  // namespace headlab
