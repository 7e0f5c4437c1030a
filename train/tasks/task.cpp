#include "train/tasks/task.h"

#include <fmt/format.h>

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

}  // namespace headlab
