#include "train/tasks/task.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"

namespace headlab {

void Batch::resize(int64_t batch, int64_t length, size_t num_features, size_t relations) {
  batch_size = batch;
  seq_len = length;
  const auto n = static_cast<size_t>(batch * length);
  features.resize(num_features);
  for (auto& f : features) f.resize(n);
  labels.resize(n);
  partners.resize(relations);
  for (auto& p : partners) p.resize(n);
}

void Batch::feature_spans(std::vector<std::span<const int32_t>>& out) const {
  out.clear();
  for (const auto& f : features) out.emplace_back(f);
}

bool Task::relation_correct(int32_t predicted, int32_t gold, int /*relation*/) const {
  return predicted == gold;
}

std::string Task::token_string(const std::vector<std::vector<int32_t>>& features,
                               int64_t index) const {
  std::string s;
  for (size_t f = 0; f < features.size(); ++f)
    s += fmt::format("{}{}", f ? ":" : "", features[f][static_cast<size_t>(index)]);
  return s;
}

bool Task::corrupt(const Batch& /*clean*/, int /*relation*/, uint64_t /*seed*/,
                   Batch& /*corrupted*/, std::vector<uint8_t>& /*measured*/) const {
  return false;
}

void Task::eval_set_batch(int64_t /*first*/, int64_t /*count*/, Batch& /*out*/) const {
  fail("task '{}' has no evaluation set: evaluation draws seeded sentences", name());
}

void EvalStream::batch(const Task& task, int64_t i, Batch& out) const {
  if (i < 0 || i >= batches) fail("evaluation batch {} is outside [0, {})", i, batches);
  if (!from_set()) {
    task.generate(seed, i, batch_size, out);
    return;
  }
  const int64_t first = i * batch_size;
  task.eval_set_batch(first, std::min(batch_size, set_sentences - first), out);
}

EvalStream eval_stream(const Task& task, int64_t batches, int64_t batch_size, uint64_t seed) {
  if (batch_size < 1) fail("evaluation batch size is {} but expected >= 1", batch_size);
  EvalStream s{batches, batch_size, seed, task.eval_set_sentences()};
  if (s.from_set()) s.batches = (s.set_sentences + batch_size - 1) / batch_size;
  return s;
}

}  // namespace headlab
