#include "train/tasks/task.h"

#include <fmt/format.h>

namespace headlab {

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

}  // namespace headlab
